#include "lib/cdcontroller/uninstall.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/common/flags.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/wire_decode.h"

namespace dra::cdcontroller {
namespace {

using k8s::ComputeDomain;

constexpr k8s::ResourceInfo kDeployments{"apps", "v1", "Deployment", "deployments", true};

struct Domain {
  k8s::ObjectMeta meta;
  std::string Name() const { return absl::StrCat(meta.namespace_name, "/", meta.name); }
};

absl::StatusOr<std::vector<Domain>> ListDomains(k8s::Client* client, const std::string& ns) {
  ASSIGN_OR_RETURN(k8s::ListPage list, client->ListAllOf(ComputeDomain::kResource, ns));
  std::vector<Domain> out;
  for (const nlohmann::json& item : list.items) {
    Domain d;
    RETURN_IF_ERROR(k8s::DecodeObjectMeta(json_access::MemberOrNull(item, "metadata"),
                                          "ComputeDomain.metadata", &d.meta));
    out.push_back(std::move(d));
  }
  // One that cannot be read whole is released all the same, by its identity.
  for (const k8s::UndecodableObject& u : list.undecodable) {
    k8s::ReportUndecodable(ComputeDomain::kResource, u);
    Domain d;
    d.meta.namespace_name = u.namespace_name;
    d.meta.name = u.name;
    d.meta.uid = u.uid;
    d.meta.resource_version = u.resource_version;
    out.push_back(std::move(d));
  }
  return out;
}

// "ns/a (finalizers: x, y), ns/b (no finalizer)"
std::string Describe(const std::vector<Domain>& domains) {
  std::vector<std::string> parts;
  for (const Domain& d : domains) {
    parts.push_back(absl::StrCat(
        d.Name(),
        d.meta.finalizers.empty()
            ? " (no finalizer)"
            : absl::StrCat(" (finalizers: ", absl::StrJoin(d.meta.finalizers, ", "), ")")));
  }
  return absl::StrJoin(parts, ", ");
}

// Deletes the domains that are not being deleted yet (the uid precondition spares a newer object
// of the same name, which the next round deletes).
absl::Status DeleteLive(k8s::Client* client, const std::vector<Domain>& domains) {
  for (const Domain& d : domains) {
    if (d.meta.deletion_timestamp.has_value()) continue;
    absl::Status s = client->Delete(ComputeDomain::kResource, d.meta.namespace_name, d.meta.name,
                                    {.uid = d.meta.uid});
    if (absl::IsNotFound(s) || k8s::IsConflict(s)) continue;
    if (!s.ok()) return Annotate(s, absl::StrCat("delete ComputeDomain ", d.Name()));
    DRA_INFO("deleted ComputeDomain", "computeDomain", d.Name(), "uid", d.meta.uid);
  }
  return absl::OkStatus();
}

bool HasOurFinalizer(const k8s::ObjectMeta& m) {
  return std::find(m.finalizers.begin(), m.finalizers.end(), k8s::kComputeDomainFinalizer) !=
         m.finalizers.end();
}

// Sleeps until `wake`, checking `stopped` every 100 ms: Cancelled "stopped while <what>".
absl::Status SleepUntil(const CleanupOptions& o, absl::Time wake, absl::string_view what) {
  while (absl::Now() < wake) {
    if (o.stopped && o.stopped()) {
      return absl::CancelledError(absl::StrCat("stopped while ", what));
    }
    absl::SleepFor(std::min(absl::Milliseconds(100), wake - absl::Now()));
  }
  return absl::OkStatus();
}

// One look at what a cleanup step waits for (PollUntilDone).
struct Look {
  bool done = false;        // nothing is left: the step succeeded
  bool look_again = false;  // everything left was acted on: look again at once, before sleeping
  size_t left = 0;          // how much is left, and
  std::string waiting_for;  // what, logged whenever it changes and named in the timeout error
};

// The loop the cleanup steps share: looks (`look` is told whether it is the first) until a look
// is done; otherwise logs `waiting` with what is left whenever that changes and looks again after
// o.poll_interval. A look's error ends it; at `deadline`, so does timeout_error(left, last);
// a shutdown signal while sleeping gives Cancelled "stopped while <sleeping>: <last>".
absl::Status PollUntilDone(
    const CleanupOptions& o, absl::Time deadline, const char* waiting, const char* what_key,
    absl::string_view sleeping, const std::function<absl::StatusOr<Look>(bool first)>& look,
    const std::function<absl::Status(size_t left, const std::string& last)>& timeout_error) {
  std::string last;
  for (bool first = true;; first = false) {
    ASSIGN_OR_RETURN(Look l, look(first));
    if (l.done) return absl::OkStatus();
    if (l.look_again && absl::Now() < deadline) continue;
    if (l.waiting_for != last) {
      DRA_INFO(waiting, "left", l.left, what_key, l.waiting_for);
      last = std::move(l.waiting_for);
    }
    if (absl::Now() >= deadline) return timeout_error(l.left, last);
    RETURN_IF_ERROR(SleepUntil(o, std::min(deadline, absl::Now() + o.poll_interval),
                               absl::StrCat(sleeping, ": ", last)));
  }
}

// The pods' "namespace/name"; empty when there are none.
absl::StatusOr<std::vector<std::string>> ListPods(k8s::Client* client, const std::string& ns,
                                                  const std::string& selector) {
  ASSIGN_OR_RETURN(nlohmann::json list,
                   client->ListAll(k8s::Pod::kResource, ns, {.label_selector = selector}));
  std::vector<std::string> names;
  for (const nlohmann::json& item : json_access::ArrayOrEmpty(list, "items")) {
    const nlohmann::json& m = json_access::MemberOrNull(item, "metadata");
    names.push_back(
        absl::StrCat(json_access::StringOr(m, "namespace"), "/", json_access::StringOr(m, "name")));
  }
  return names;
}

// Scales the controller's Deployment to 0 and waits until its pods are gone: a running controller
// would add its finalizer back and re-create the objects being removed. A Deployment that is not
// there is nothing to stop.
absl::Status StopController(k8s::Client* client, const CleanupOptions& o, absl::Time deadline) {
  if (o.controller_deployment.empty()) return absl::OkStatus();
  const std::string ref = absl::StrCat(o.driver_namespace, "/", o.controller_deployment);
  absl::StatusOr<nlohmann::json> d =
      client->Get(kDeployments, o.driver_namespace, o.controller_deployment);
  if (absl::IsNotFound(d.status())) {
    DRA_INFO("the controller's Deployment is not there; nothing to stop", "deployment", ref);
    return absl::OkStatus();
  }
  if (!d.ok()) return Annotate(d.status(), absl::StrCat("get Deployment ", ref));
  std::vector<std::string> selector;
  const nlohmann::json& spec = json_access::MemberOrNull(*d, "spec");
  const nlohmann::json& match =
      json_access::MemberOrNull(json_access::MemberOrNull(spec, "selector"), "matchLabels");
  if (match.is_object()) {
    for (const auto& [k, v] : match.items()) {
      if (v.is_string()) selector.push_back(absl::StrCat(k, "=", v.get<std::string>()));
    }
  }
  if (selector.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Deployment ", ref,
                     ": spec.selector.matchLabels is empty; cannot tell its pods (the chart's "
                     "controller Deployment always has one)"));
  }
  if (json_access::IntOr(spec, "replicas", 1) != 0) {
    absl::StatusOr<nlohmann::json> r = client->MergePatch(
        kDeployments, o.driver_namespace, o.controller_deployment, {{"spec", {{"replicas", 0}}}});
    if (!r.ok()) return Annotate(r.status(), absl::StrCat("scale Deployment ", ref, " to 0"));
    DRA_INFO("scaled the controller to 0 replicas before releasing the ComputeDomains",
             "deployment", ref);
  }
  const std::string sel = absl::StrJoin(selector, ",");
  for (;;) {
    absl::StatusOr<std::vector<std::string>> listed = ListPods(client, o.driver_namespace, sel);
    if (!listed.ok()) return Annotate(listed.status(), absl::StrCat("list the pods of ", ref));
    if (listed->empty()) return absl::OkStatus();
    const std::string pods = absl::StrJoin(*listed, ", ");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the controller's pods (Deployment ", ref,
                       ", scaled to 0) are still there "
                       "after ",
                       absl::FormatDuration(o.timeout), ": ", pods,
                       ". `helm uninstall` again retries this step"));
    }
    RETURN_IF_ERROR(SleepUntil(o, std::min(deadline, absl::Now() + o.poll_interval),
                               absl::StrCat("waiting for the controller's pods to go: ", pods)));
  }
}

// Removes the domain's objects and then its finalizer: OK when released (or gone), Unavailable
// (with why) while something is left, the API error otherwise.
absl::Status ReleaseDomain(k8s::Client* client, const CleanupOptions& o, const Domain& d) {
  absl::Status s = internal::RemoveDomainObjects(
      client, d.meta.uid, d.meta.namespace_name,
      o.driver_namespace.empty() ? std::vector<std::string>()
                                 : std::vector<std::string>{o.driver_namespace});
  if (!s.ok()) return s;
  std::vector<std::string> rest;
  for (const std::string& f : d.meta.finalizers) {
    if (f != k8s::kComputeDomainFinalizer) rest.push_back(f);
  }
  absl::StatusOr<nlohmann::json> r = client->MergePatch(
      ComputeDomain::kResource, d.meta.namespace_name, d.meta.name,
      {{"metadata", {{"resourceVersion", d.meta.resource_version}, {"finalizers", rest}}}});
  if (absl::IsNotFound(r.status())) return absl::OkStatus();
  if (k8s::IsConflict(r.status())) {
    return absl::UnavailableError("the ComputeDomain changed meanwhile; trying again");
  }
  if (!r.ok()) {
    return Annotate(r.status(), absl::StrCat("remove the finalizer of ComputeDomain ", d.Name()));
  }
  DRA_INFO("released ComputeDomain: the driver's objects and finalizer are gone, the domain stays",
           "computeDomain", d.Name(), "uid", d.meta.uid);
  return absl::OkStatus();
}

}  // namespace

absl::Status ReleaseAllComputeDomains(k8s::Client* client, const CleanupOptions& o) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o.timeout;
  auto look = [&](bool first) -> absl::StatusOr<Look> {
    absl::StatusOr<std::vector<Domain>> domains = ListDomains(client, o.only_namespace);
    if (first && absl::IsNotFound(domains.status())) {
      DRA_INFO("the cluster serves no ComputeDomain API; nothing to clean up");
      return Look{.done = true};
    }
    if (!domains.ok()) return Annotate(domains.status(), "list ComputeDomains");
    std::vector<Domain> held;
    for (Domain& d : *domains) {
      if (HasOurFinalizer(d.meta)) held.push_back(std::move(d));
    }
    if (held.empty()) {
      if (first) {
        DRA_INFO("no ComputeDomain carries the driver's finalizer; nothing to release", "domains",
                 domains->size());
      } else {
        DRA_INFO("released every ComputeDomain; the domain objects stay", "elapsed",
                 absl::Now() - start);
      }
      return Look{.done = true};
    }
    if (first) {
      DRA_INFO("releasing every ComputeDomain before the driver goes (the domains stay)", "count",
               held.size(), "timeout", o.timeout);
      RETURN_IF_ERROR(StopController(client, o, deadline));
    }
    std::vector<std::string> pending;
    for (const Domain& d : held) {
      absl::Status s = ReleaseDomain(client, o, d);
      if (absl::IsUnavailable(s)) {
        pending.push_back(absl::StrCat(d.Name(), " (", s.message(), ")"));
      } else if (!s.ok()) {
        return Annotate(s, absl::StrCat("release ComputeDomain ", d.Name()));
      }
    }
    // All released: the next listing confirms. Held again at the deadline means something still
    // adds the finalizer.
    const bool all_released = pending.empty();
    if (all_released) {
      for (const Domain& d : held) {
        pending.push_back(absl::StrCat(d.Name(), " (its finalizer came back)"));
      }
    }
    return Look{.look_again = all_released,
                .left = pending.size(),
                .waiting_for = absl::StrJoin(pending, ", ")};
  };
  return PollUntilDone(
      o, deadline, "waiting for the driver's objects of ComputeDomains to go", "domains",
      "releasing ComputeDomains", look, [&](size_t left, const std::string& last) {
        return absl::DeadlineExceededError(absl::StrCat(
            left, " ComputeDomain(s) not released within ", absl::FormatDuration(o.timeout), ": ",
            last,
            ". Objects with other finalizers, or that keep coming back, hold them. `helm "
            "uninstall` again retries this step; `helm uninstall --no-hooks` skips it and leaves "
            "these ComputeDomains with the finalizer resource.nvidia.com/computeDomain"));
      });
}

absl::Status WaitForDaemonPodsGone(k8s::Client* client, const CleanupOptions& o, absl::Time start) {
  const std::string selector(k8s::kComputeDomainLabel);
  bool waited = false;
  auto look = [&](bool) -> absl::StatusOr<Look> {
    absl::StatusOr<std::vector<std::string>> pods = ListPods(client, o.driver_namespace, selector);
    if (!pods.ok()) return Annotate(pods.status(), "list the IMEX daemon pods");
    if (pods->empty()) {
      if (waited) DRA_INFO("every IMEX daemon pod is gone");
      return Look{.done = true};
    }
    waited = true;
    return Look{.left = pods->size(), .waiting_for = absl::StrJoin(*pods, ", ")};
  };
  return PollUntilDone(
      o, start + o.timeout,
      "waiting for the IMEX daemon pods to go (the kubelet plugins unprepare their claims)", "pods",
      "waiting for IMEX daemon pods to go", look, [&](size_t, const std::string& last) {
        return absl::DeadlineExceededError(absl::StrCat(
            "IMEX daemon pods still there ", absl::FormatDuration(absl::Now() - start),
            " after the cleanup began: ", last,
            "; their nodes keep the daemons' prepared claims and files (a node that is down "
            "cannot unprepare)"));
      });
}

absl::Status DeleteAllComputeDomains(k8s::Client* client, const CleanupOptions& o) {
  const absl::Time start = absl::Now();
  auto look = [&](bool first) -> absl::StatusOr<Look> {
    absl::StatusOr<std::vector<Domain>> domains = ListDomains(client, o.only_namespace);
    if (first && absl::IsNotFound(domains.status())) {
      DRA_INFO("the cluster serves no ComputeDomain API; nothing to clean up");
      return Look{.done = true};
    }
    if (!domains.ok()) return Annotate(domains.status(), "list ComputeDomains");
    if (domains->empty()) {
      if (first) {
        DRA_INFO("no ComputeDomains; nothing to clean up");
      } else {
        DRA_INFO("every ComputeDomain is finalized", "elapsed", absl::Now() - start);
      }
      return Look{.done = true};
    }
    if (first) {
      DRA_INFO("deleting every ComputeDomain before the driver goes", "count", domains->size(),
               "timeout", o.timeout);
    }
    RETURN_IF_ERROR(DeleteLive(client, *domains));
    return Look{.left = domains->size(), .waiting_for = Describe(*domains)};
  };
  return PollUntilDone(
      o, start + o.timeout, "waiting for the controller to finalize ComputeDomains", "domains",
      "waiting for ComputeDomains to be finalized", look,
      [&](size_t left, const std::string& last) {
        return absl::DeadlineExceededError(absl::StrCat(
            left, " ComputeDomain(s) not finalized within ", absl::FormatDuration(o.timeout), ": ",
            last,
            ". The compute-domain controller removes its finalizer "
            "resource.nvidia.com/computeDomain once it has deleted the domain's IMEX DaemonSet "
            "and ResourceClaimTemplates: check that it runs and what it logs (kubectl -n ",
            o.driver_namespace.empty() ? "<driver namespace>" : o.driver_namespace,
            " logs -l dra-driver-nvidia-gpu-component=controller). `helm uninstall` again retries "
            "this step; `helm uninstall --no-hooks` skips it and leaves these ComputeDomains with "
            "their finalizers"));
      });
}

void AddCleanupFlags(Flags& flags, CleanupProcessOptions* o) {
  flags.AddDuration("timeout", "CLEANUP_TIMEOUT", &o->cleanup.timeout,
                    "How long to wait for the controller to finalize the deleted ComputeDomains "
                    "before failing (keep it below helm's --timeout, 5m by default).");
  flags.AddString("namespace", "NAMESPACE", &o->cleanup.driver_namespace,
                  "The driver's namespace, where the controller and the IMEX daemons run.");
  flags.AddBool("delete-compute-domains", "CLEANUP_DELETE_COMPUTE_DOMAINS",
                &o->cleanup.delete_compute_domains,
                "Delete every ComputeDomain of the cluster and wait until the running controller "
                "has finalized them. Default false: release them instead (stop the controller, "
                "remove the driver's objects, node labels and finalizer of each domain, and leave "
                "the domain objects).");
  flags.AddString("controller-deployment", "CONTROLLER_DEPLOYMENT",
                  &o->cleanup.controller_deployment,
                  "The controller's Deployment in --namespace, scaled to 0 before the "
                  "ComputeDomains are released (empty: nothing is stopped).");
  flags
      .AddString("only-namespace", "CLEANUP_ONLY_NAMESPACE", &o->cleanup.only_namespace,
                 "Tests only: delete only the ComputeDomains of this namespace.")
      .Hidden();
  flags.AddKubeClientFlags(&o->kubeconfig, &o->kube_api_qps, &o->kube_api_burst);
  flags.AddLoggingFlags();
}

absl::Status RunCleanup(CleanupProcessOptions o, SignalHandler* signals) {
  if (o.cleanup.driver_namespace.empty()) {
    return absl::InvalidArgumentError(
        "--namespace (env NAMESPACE) is empty; give the driver's namespace (the chart sets it)");
  }
  if (o.cleanup.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout (env CLEANUP_TIMEOUT): ", absl::FormatDuration(o.cleanup.timeout),
                     " is not positive; give a duration such as 4m"));
  }
  ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::ResolveRestConfig(o.kubeconfig));
  ASSIGN_OR_RETURN(
      std::unique_ptr<k8s::Client> client,
      k8s::Client::Create(rest, internal::ClientOptionsFor(o.kube_api_qps, o.kube_api_burst)));
  o.cleanup.stopped = [signals] { return signals->ShutdownRequested(); };
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(o.cleanup.delete_compute_domains
                      ? DeleteAllComputeDomains(client.get(), o.cleanup)
                      : ReleaseAllComputeDomains(client.get(), o.cleanup));
  // Not a failure: the domains are done; what a pod that cannot go leaves is on its node.
  if (absl::Status s = WaitForDaemonPodsGone(client.get(), o.cleanup, start); !s.ok()) {
    DRA_WARNING("the IMEX daemon pods did not all go", "err", s);
  }
  return absl::OkStatus();
}

}  // namespace dra::cdcontroller
