#include "lib/cdcontroller/controller.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/cdcontroller/render.h"
#include "lib/cdcontroller/status.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/events.h"

namespace dra::cdcontroller {
namespace {

using k8s::ComputeDomain;
using k8s::ComputeDomainClique;
using k8s::ResourceClaimTemplate;

using internal::DomainLabel;
using internal::kIndexByDomain;
using internal::kIndexByUid;

std::string Describe(const ComputeDomain& cd) {
  return absl::StrCat(cd.metadata.namespace_name, "/", cd.metadata.name);
}

// Creates `object`; AlreadyExists is fine when the existing object carries `uid`'s label.
absl::Status CreateOwned(k8s::Client* client, const k8s::ResourceInfo& r, const std::string& ns,
                         const nlohmann::json& object, const std::string& uid,
                         absl::string_view what) {
  absl::StatusOr<nlohmann::json> created = client->Create(r, ns, object);
  if (created.ok()) {
    DRA_INFO("created object", "kind", r.kind, "object",
             absl::StrCat(ns, "/", object["metadata"]["name"].get<std::string>()), "computeDomain",
             uid);
    return absl::OkStatus();
  }
  if (!absl::IsAlreadyExists(created.status())) {
    return Annotate(created.status(), absl::StrCat("create ", what));
  }
  const std::string name = object["metadata"]["name"].get<std::string>();
  ASSIGN_OR_RETURN(nlohmann::json existing, client->Get(r, ns, name));
  ASSIGN_OR_RETURN(k8s::ObjectMeta meta, k8s::ObjectMeta::FromJson(existing["metadata"]));
  if (DomainLabel(meta) != uid) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", r.kind, " ", ns, "/", name,
                                                      " already exists and does not belong to this "
                                                      "ComputeDomain (label ",
                                                      k8s::kComputeDomainLabel, "=\"",
                                                      DomainLabel(meta), "\", expected \"", uid,
                                                      "\"); delete or rename it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Controller>> Controller::Create(k8s::Client* client,
                                                               ControllerConfig config,
                                                               metrics::Registry* registry) {
  if (config.watch_namespace.empty() == false && !config.node_label_cleanup_filter) {
    config.stale_node_label_cleanup = false;
  }
  return std::unique_ptr<Controller>(new Controller(client, std::move(config), registry));
}

Controller::Controller(k8s::Client* client, ControllerConfig config, metrics::Registry* registry)
    : client_(client),
      config_(std::move(config)),
      queue_({.name = "compute-domains",
              .base_delay = absl::Milliseconds(5),
              .max_delay = absl::Minutes(2),
              .jitter = 0.1,
              // No token bucket on enqueues: every clique or pod event enqueues its domain, and
              // a bucket charged per event (coalesced or not) runs into debt when a large domain
              // forms (bench/computedomain: 18 nodes waited 5 s for their Ready status, 256 would
              // wait minutes). Work is bounded without it: items coalesce per key, a key never
              // runs twice at once, a status is written only when it changed, and failures retry
              // on the key's own backoff. (client-go likewise rate-limits only retries.)
              .qps = 0,
              .workers = 4}) {
  if (registry != nullptr) {
    info_gauge_ = registry->AddGauge("nvidia_dra_compute_domain_info",
                                     "Number of ComputeDomains per global status.", {"status"});
    info_gauge_->WithLabels({std::string(k8s::kComputeDomainStatusReady)});
    info_gauge_->WithLabels({std::string(k8s::kComputeDomainStatusNotReady)});
  }
}

Controller::~Controller() { Stop(); }

std::vector<std::string> Controller::DaemonSetNamespaces() const {
  std::vector<std::string> out = {config_.driver_namespace};
  for (const std::string& ns : config_.additional_namespaces) {
    if (std::find(out.begin(), out.end(), ns) == out.end()) out.push_back(ns);
  }
  return out;
}

void Controller::EnqueueDomain(const std::string& uid) {
  queue_.Enqueue("cd/" + uid, [this, uid] {
    absl::Status s = ReconcileDomain(uid);
    if (absl::IsFailedPrecondition(s)) ReportToUser(uid, s);
    return s;
  });
}

void Controller::ReportToUser(const std::string& uid, const absl::Status& s) {
  std::shared_ptr<const ComputeDomain> cd = DomainByUid(uid);
  if (!cd) return;
  {
    absl::MutexLock lock(&mu_);
    std::string& last = reported_[uid];
    if (last == s.message()) return;  // once per distinct problem, not once per retry
    last = std::string(s.message());
  }
  k8s::EventTarget target{.api_version = std::string(k8s::ApiVersion(ComputeDomain::kResource)),
                          .kind = "ComputeDomain",
                          .namespace_name = cd->metadata.namespace_name,
                          .name = cd->metadata.name,
                          .uid = uid};
  absl::Status posted = k8s::PostEvent(client_, target, "Warning", "ReconcileFailed",
                                       std::string(s.message()), "compute-domain-controller");
  if (!posted.ok()) DRA_WARNING("posting event failed", "computeDomain", uid, "err", posted);
}

std::shared_ptr<const ComputeDomain> Controller::DomainByUid(const std::string& uid) const {
  auto found = domains_->ByIndex(kIndexByUid, uid);
  if (found.empty()) return nullptr;
  absl::MutexLock lock(&mu_);
  auto it = written_.find(uid);
  if (it != written_.end() && it->second.first == found.front()->metadata.resource_version) {
    return it->second.second;
  }
  return found.front();
}

void Controller::RememberWrite(const std::string& replaced_rv, const nlohmann::json& result) {
  absl::StatusOr<ComputeDomain> cd = ComputeDomain::FromJson(result);
  if (!cd.ok()) return;
  absl::MutexLock lock(&mu_);
  written_[cd->metadata.uid] = {replaced_rv, std::make_shared<const ComputeDomain>(*cd)};
}

absl::Status Controller::ReconcileDomain(const std::string& uid) {
  std::shared_ptr<const ComputeDomain> cached = DomainByUid(uid);
  if (!cached) return absl::OkStatus();  // gone; leftovers are the garbage collector's
  if (cached->metadata.deletion_timestamp.has_value()) return FinalizeDomain(*cached);
  ComputeDomain cd = *cached;
  const bool has_finalizer =
      std::find(cd.metadata.finalizers.begin(), cd.metadata.finalizers.end(),
                k8s::kComputeDomainFinalizer) != cd.metadata.finalizers.end();
  if (!has_finalizer) {
    std::vector<std::string> finalizers = cd.metadata.finalizers;
    finalizers.push_back(std::string(k8s::kComputeDomainFinalizer));
    nlohmann::json patch = {
        {"metadata",
         {{"resourceVersion", cd.metadata.resource_version}, {"finalizers", finalizers}}}};
    absl::StatusOr<nlohmann::json> patched = client_->MergePatch(
        ComputeDomain::kResource, cd.metadata.namespace_name, cd.metadata.name, patch);
    if (!patched.ok()) {
      return Annotate(patched.status(),
                      absl::StrCat("add finalizer to ComputeDomain ", Describe(cd)));
    }
    ASSIGN_OR_RETURN(cd, ComputeDomain::FromJson(*patched));
    RememberWrite(cached->metadata.resource_version, *patched);
    DRA_INFO("added finalizer", "computeDomain", Describe(cd), "uid", uid);
  }
  if (!config_.host_managed()) RETURN_IF_ERROR(EnsureDaemonObjects(cd));
  RETURN_IF_ERROR(EnsureWorkloadClaimTemplate(cd));
  return SyncStatus(cd);
}

absl::Status Controller::ConfirmLive(const ComputeDomain& cd) {
  absl::StatusOr<nlohmann::json> live =
      client_->Get(ComputeDomain::kResource, cd.metadata.namespace_name, cd.metadata.name);
  if (!live.ok() && !absl::IsNotFound(live.status())) {
    return Annotate(live.status(), absl::StrCat("get ComputeDomain ", Describe(cd)));
  }
  if (absl::IsNotFound(live.status()) || (*live)["metadata"].value("uid", "") != cd.metadata.uid ||
      (*live)["metadata"].contains("deletionTimestamp")) {
    return absl::AbortedError(absl::StrCat("ComputeDomain ", Describe(cd),
                                           " is gone or being deleted; not creating its objects"));
  }
  return absl::OkStatus();
}

absl::Status Controller::EnsureDaemonObjects(const ComputeDomain& cd) {
  const std::string& uid = cd.metadata.uid;
  if (daemon_rcts_->ByIndex(kIndexByDomain, uid).empty()) {
    RETURN_IF_ERROR(ConfirmLive(cd));
    ASSIGN_OR_RETURN(nlohmann::json rct, RenderDaemonClaimTemplate(cd, config_));
    RETURN_IF_ERROR(
        CreateOwned(client_, ResourceClaimTemplate::kResource, config_.driver_namespace, rct, uid,
                    absl::StrCat("daemon ResourceClaimTemplate of ComputeDomain ", Describe(cd))));
  }
  size_t found = 0;
  for (const auto& ds : daemonsets_) found += ds->ByIndex(kIndexByDomain, uid).size();
  if (found > 1) {
    return absl::FailedPreconditionError(absl::StrCat("more than one DaemonSet labelled ",
                                                      k8s::kComputeDomainLabel, "=", uid,
                                                      " (ComputeDomain ", Describe(cd), ")"));
  }
  if (found == 0) {
    RETURN_IF_ERROR(ConfirmLive(cd));
    ASSIGN_OR_RETURN(nlohmann::json ds, RenderDaemonSet(cd, config_));
    RETURN_IF_ERROR(CreateOwned(client_, k8s::DaemonSet::kResource, config_.driver_namespace, ds,
                                uid, absl::StrCat("DaemonSet of ComputeDomain ", Describe(cd))));
  }
  return absl::OkStatus();
}

absl::Status Controller::EnsureWorkloadClaimTemplate(const ComputeDomain& cd) {
  const std::string& name = cd.spec.channel.resource_claim_template_name;
  for (const auto& rct : workload_rcts_->ByIndex(kIndexByDomain, cd.metadata.uid)) {
    if (rct->metadata.name == name && rct->metadata.namespace_name == cd.metadata.namespace_name) {
      return absl::OkStatus();
    }
  }
  RETURN_IF_ERROR(ConfirmLive(cd));
  ASSIGN_OR_RETURN(nlohmann::json rct, RenderWorkloadClaimTemplate(cd, config_));
  return CreateOwned(
      client_, ResourceClaimTemplate::kResource, cd.metadata.namespace_name, rct, cd.metadata.uid,
      absl::StrCat("spec.channel.resourceClaimTemplate.name of ComputeDomain ", Describe(cd)));
}

absl::Status Controller::SyncStatus(const ComputeDomain& cd) {
  const std::string& uid = cd.metadata.uid;
  std::vector<k8s::ComputeDomainNode> nodes;
  if (!config_.host_managed()) {
    std::vector<DaemonPod> pods;
    for (const auto& p : pods_->ByIndex(kIndexByDomain, uid)) pods.push_back(DaemonPodFromPod(*p));
    if (config_.cliques_enabled) {
      std::vector<std::shared_ptr<const ComputeDomainClique>> held =
          cliques_->ByIndex(kIndexByDomain, uid);
      std::vector<const ComputeDomainClique*> cliques;
      for (const auto& c : held) cliques.push_back(c.get());
      nodes = BuildNodes(cliques, pods);
    } else {
      nodes = BuildNodesWithoutCliques(cd.status.nodes, pods);
    }
  }
  const std::string status = GlobalStatus(cd.spec.num_nodes, nodes, config_.host_managed());
  if (status == cd.status.status && SameNodes(nodes, cd.status.nodes)) {
    RecordStatus(uid, status);
    return absl::OkStatus();
  }
  ComputeDomain next = cd;
  next.status.status = status;
  next.status.nodes = nodes;
  absl::StatusOr<nlohmann::json> updated =
      client_->UpdateStatus(ComputeDomain::kResource, cd.metadata.namespace_name, next.ToJson());
  if (!updated.ok()) {
    return Annotate(updated.status(),
                    absl::StrCat("update status of ComputeDomain ", Describe(cd)));
  }
  RememberWrite(cd.metadata.resource_version, *updated);
  DRA_INFO("updated ComputeDomain status", "computeDomain", Describe(cd), "status", status, "nodes",
           nodes.size());
  RecordStatus(uid, status);
  return absl::OkStatus();
}

absl::Status Controller::PruneClique(const std::string& key) {
  std::shared_ptr<const ComputeDomainClique> clique = cliques_->Get(key);
  if (!clique) return absl::OkStatus();
  const std::string uid = DomainLabel(clique->metadata);
  std::set<std::string> nodes;
  for (const auto& p : pods_->ByIndex(kIndexByDomain, uid)) {
    if (!p->spec.node_name.empty()) nodes.insert(p->spec.node_name);
  }
  if (!PrunedDaemons(*clique, nodes)) return absl::OkStatus();
  // The pod cache may lag behind the clique cache (a daemon registers right after its pod
  // starts): only what the API server confirms is stale is removed.
  k8s::ListOptions selector{.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", uid)};
  ASSIGN_OR_RETURN(nlohmann::json live,
                   client_->ListAll(k8s::Pod::kResource, config_.driver_namespace, selector));
  for (const nlohmann::json& item : live["items"]) {
    if (auto pod = k8s::Pod::FromJson(item); pod.ok() && !pod->spec.node_name.empty()) {
      nodes.insert(pod->spec.node_name);
    }
  }
  std::optional<std::vector<k8s::ComputeDomainDaemonInfo>> kept = PrunedDaemons(*clique, nodes);
  if (!kept) return absl::OkStatus();
  ComputeDomainClique next = *clique;
  next.daemons = *kept;
  absl::StatusOr<nlohmann::json> updated = client_->Update(
      ComputeDomainClique::kResource, clique->metadata.namespace_name, next.ToJson());
  if (!updated.ok()) return Annotate(updated.status(), absl::StrCat("prune clique ", key));
  DRA_INFO("removed clique entries of nodes without a daemon pod", "clique", key, "removed",
           clique->daemons.size() - kept->size());
  return absl::OkStatus();
}

void Controller::RecordStatus(const std::string& uid, const std::string& status) {
  if (info_gauge_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  statuses_[uid] = status.empty() ? std::string(k8s::kComputeDomainStatusNotReady) : status;
  std::map<std::string, int> counts = {{std::string(k8s::kComputeDomainStatusReady), 0},
                                       {std::string(k8s::kComputeDomainStatusNotReady), 0}};
  for (const auto& [u, s] : statuses_) ++counts[s];
  for (const auto& [s, n] : counts) info_gauge_->WithLabels({s})->Set(n);
}

void Controller::ForgetStatus(const std::string& uid) {
  absl::MutexLock lock(&mu_);
  written_.erase(uid);
  reported_.erase(uid);
  if (info_gauge_ == nullptr) return;
  auto it = statuses_.find(uid);
  if (it == statuses_.end()) return;
  info_gauge_->WithLabels({it->second})->Dec();
  statuses_.erase(it);
}

}  // namespace dra::cdcontroller
