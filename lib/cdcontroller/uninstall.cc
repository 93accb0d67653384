#include "lib/cdcontroller/uninstall.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/common/flags.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/rest_config.h"

namespace dra::cdcontroller {
namespace {

using k8s::ComputeDomain;

struct Domain {
  k8s::ObjectMeta meta;
  std::string Name() const { return absl::StrCat(meta.namespace_name, "/", meta.name); }
};

absl::StatusOr<std::vector<Domain>> ListDomains(k8s::Client* client, const std::string& ns) {
  ASSIGN_OR_RETURN(nlohmann::json list, client->ListAll(ComputeDomain::kResource, ns));
  std::vector<Domain> out;
  for (const nlohmann::json& item : list.value("items", nlohmann::json::array())) {
    Domain d;
    RETURN_IF_ERROR(k8s::DecodeObjectMeta(item.value("metadata", nlohmann::json::object()),
                                          "ComputeDomain.metadata", &d.meta));
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

}  // namespace

absl::Status DeleteAllComputeDomains(k8s::Client* client, const CleanupOptions& o) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o.timeout;
  std::string last;
  for (bool first = true;; first = false) {
    absl::StatusOr<std::vector<Domain>> domains = ListDomains(client, o.only_namespace);
    if (first && absl::IsNotFound(domains.status())) {
      DRA_INFO("the cluster serves no ComputeDomain API; nothing to clean up");
      return absl::OkStatus();
    }
    if (!domains.ok()) return Annotate(domains.status(), "list ComputeDomains");
    if (domains->empty()) {
      if (first) {
        DRA_INFO("no ComputeDomains; nothing to clean up");
      } else {
        DRA_INFO("every ComputeDomain is finalized", "elapsed", absl::Now() - start);
      }
      return absl::OkStatus();
    }
    if (first) {
      DRA_INFO("deleting every ComputeDomain before the driver goes", "count", domains->size(),
               "timeout", o.timeout);
    }
    RETURN_IF_ERROR(DeleteLive(client, *domains));
    std::string now = Describe(*domains);
    if (now != last) {
      DRA_INFO("waiting for the controller to finalize ComputeDomains", "left", domains->size(),
               "domains", now);
      last = std::move(now);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          domains->size(), " ComputeDomain(s) not finalized within ",
          absl::FormatDuration(o.timeout), ": ", last,
          ". The compute-domain controller removes its finalizer resource.nvidia.com/computeDomain "
          "once it has deleted the domain's IMEX DaemonSet and ResourceClaimTemplates: check that "
          "it runs and what it logs (kubectl -n ",
          o.driver_namespace.empty() ? "<driver namespace>" : o.driver_namespace,
          " logs -l dra-driver-nvidia-gpu-component=controller). `helm uninstall` again retries "
          "this step; `helm uninstall --no-hooks` skips it and leaves these ComputeDomains with "
          "their finalizers"));
    }
    const absl::Time wake = std::min(deadline, absl::Now() + o.poll_interval);
    while (absl::Now() < wake) {
      if (o.stopped && o.stopped()) {
        return absl::CancelledError(
            absl::StrCat("stopped while waiting for ComputeDomains to be finalized: ", last));
      }
      absl::SleepFor(std::min(absl::Milliseconds(100), wake - absl::Now()));
    }
  }
}

void AddCleanupFlags(Flags& flags, CleanupProcessOptions* o) {
  flags.AddDuration("timeout", "CLEANUP_TIMEOUT", &o->cleanup.timeout,
                    "How long to wait for the controller to finalize the deleted ComputeDomains "
                    "before failing (keep it below helm's --timeout, 5m by default).");
  flags.AddString("namespace", "NAMESPACE", &o->cleanup.driver_namespace,
                  "The driver's namespace, where the controller runs (named in errors).");
  flags
      .AddString("only-namespace", "CLEANUP_ONLY_NAMESPACE", &o->cleanup.only_namespace,
                 "Tests only: delete only the ComputeDomains of this namespace.")
      .Hidden();
  flags.AddKubeClientFlags(&o->kubeconfig, &o->kube_api_qps, &o->kube_api_burst);
  flags.AddLoggingFlags();
}

absl::Status RunCleanup(CleanupProcessOptions o, SignalHandler* signals) {
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
  return DeleteAllComputeDomains(client.get(), o.cleanup);
}

}  // namespace dra::cdcontroller
