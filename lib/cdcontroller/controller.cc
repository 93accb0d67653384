#include "lib/cdcontroller/controller.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/cdcontroller/clique_sync.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/cdcontroller/render.h"
#include "lib/cdcontroller/status.h"
#include "lib/common/json_access.h"
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

// Whether `a` is a later version of the same object than `b` (resourceVersions of one object from
// etcd increase; anything unparsable counts as not newer, so the informer's copy is used).
bool NewerVersion(const k8s::ObjectMeta& a, const k8s::ObjectMeta& b) {
  uint64_t va = 0, vb = 0;
  return a.uid == b.uid && absl::SimpleAtoi(a.resource_version, &va) &&
         absl::SimpleAtoi(b.resource_version, &vb) && va > vb;
}

std::string Describe(const ComputeDomain& cd) {
  return absl::StrCat(cd.metadata.namespace_name, "/", cd.metadata.name);
}

// Creates `object`; AlreadyExists is fine when the existing object carries `uid`'s label.
absl::Status CreateOwned(k8s::Client* client, const k8s::ResourceInfo& r, const std::string& ns,
                         const nlohmann::json& object, const std::string& uid,
                         absl::string_view what) {
  absl::StatusOr<nlohmann::json> created = client->Create(r, ns, object);
  if (created.ok()) {
    DRA_INFO(
        "created object", "kind", r.kind, "object",
        absl::StrCat(ns, "/",
                     json_access::StringOr(json_access::MemberOrNull(object, "metadata"), "name")),
        "computeDomain", uid);
    return absl::OkStatus();
  }
  if (!absl::IsAlreadyExists(created.status())) {
    return Annotate(created.status(), absl::StrCat("create ", what));
  }
  const std::string name =
      json_access::StringOr(json_access::MemberOrNull(object, "metadata"), "name");
  ASSIGN_OR_RETURN(nlohmann::json existing, client->Get(r, ns, name));
  ASSIGN_OR_RETURN(k8s::ObjectMeta meta,
                   k8s::ObjectMeta::FromJson(json_access::MemberOrNull(existing, "metadata")));
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
    vanished_counter_ =
        registry
            ->AddCounter("nvidia_dra_compute_domain_vanished_total",
                         "ComputeDomains that disappeared with the controller's finalizer still on "
                         "them (deleted by the API server while the finalizer was being added, or "
                         "the finalizer removed by someone else); their objects are then removed.",
                         {})
            ->WithLabels({});
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
  if (!cached) {
    // Gone. Normally FinalizeDomain removed its objects first. A domain that vanished with our
    // finalizer (OnDomainDeleted) has its objects removed here; nothing else would before the
    // periodic cleanup: they carry no owner reference (the daemon objects live in another
    // namespace than the domain, and owner references cannot cross namespaces).
    std::optional<std::string> vanished_ns;
    {
      absl::MutexLock lock(&mu_);
      auto it = vanished_.find(uid);
      if (it != vanished_.end()) vanished_ns = it->second;
    }
    // Claims waiting for this domain's daemon learn that it will not come.
    absl::Status binding = SyncBindingConditions(uid, nullptr, {});
    if (!vanished_ns) return binding;
    absl::Status cleaned = CleanUpVanishedDomain(uid, *vanished_ns);
    return cleaned.ok() ? binding : cleaned;
  }
  if (cached->metadata.deletion_timestamp.has_value()) {
    absl::Status binding = SyncBindingConditions(uid, cached.get(), {});
    absl::Status finalized = FinalizeDomain(*cached);
    return finalized.ok() ? binding : finalized;
  }
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
  std::vector<ComputeDomainClique> cliques;
  if (!config_.host_managed()) {
    ASSIGN_OR_RETURN(cliques, SyncCliques(cd));
  }
  // The claims waiting for a daemon first: the scheduler binds their pods as soon as they are
  // reported, and the status is informational.
  absl::Status binding = SyncBindingConditions(uid, &cd, DomainNodes(uid, cliques));
  RETURN_IF_ERROR(SyncStatus(cd, cliques));
  return binding;
}

absl::Status Controller::ConfirmLive(const ComputeDomain& cd) {
  absl::StatusOr<nlohmann::json> live =
      client_->Get(ComputeDomain::kResource, cd.metadata.namespace_name, cd.metadata.name);
  if (!live.ok() && !absl::IsNotFound(live.status())) {
    return Annotate(live.status(), absl::StrCat("get ComputeDomain ", Describe(cd)));
  }
  const nlohmann::json& live_meta =
      live.ok() ? json_access::MemberOrNull(*live, "metadata") : nlohmann::json::object();
  if (absl::IsNotFound(live.status()) ||
      json_access::StringOr(live_meta, "uid") != cd.metadata.uid ||
      json_access::Find(live_meta, "deletionTimestamp") != nullptr) {
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

std::vector<k8s::ComputeDomainNode> Controller::DomainNodes(
    const std::string& uid, const std::vector<ComputeDomainClique>& held) const {
  if (config_.host_managed()) return {};
  std::vector<DaemonPod> pods;
  for (const auto& p : pods_->ByIndex(kIndexByDomain, uid)) pods.push_back(DaemonPodFromPod(*p));
  std::vector<const ComputeDomainClique*> cliques;
  for (const ComputeDomainClique& c : held) cliques.push_back(&c);
  return BuildNodes(cliques, pods);
}

absl::Status Controller::SyncStatus(const ComputeDomain& cd,
                                    const std::vector<ComputeDomainClique>& held) {
  const std::string& uid = cd.metadata.uid;
  const std::vector<k8s::ComputeDomainNode> nodes = DomainNodes(uid, held);
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

std::shared_ptr<const ComputeDomainClique> Controller::KnownClique(const std::string& key) const {
  std::shared_ptr<const ComputeDomainClique> cached = cliques_->Get(key);
  absl::MutexLock lock(&mu_);
  auto it = clique_written_.find(key);
  if (it == clique_written_.end()) return cached;
  if (!cached || NewerVersion(it->second->metadata, cached->metadata)) return it->second;
  return cached;
}

void Controller::RememberClique(const ComputeDomainClique& written) {
  const std::string key = absl::StrCat(written.metadata.namespace_name, "/", written.metadata.name);
  absl::MutexLock lock(&mu_);
  clique_written_[key] = std::make_shared<const ComputeDomainClique>(written);
  std::map<std::string, int64_t>& indices = clique_indices_[key];
  indices.clear();
  for (const k8s::ComputeDomainDaemonInfo& d : written.daemons) indices[d.node_name] = d.index;
}

void Controller::ForgetClique(const std::string& key) {
  absl::MutexLock lock(&mu_);
  clique_written_.erase(key);
}

absl::StatusOr<std::vector<ComputeDomainClique>> Controller::SyncCliques(const ComputeDomain& cd) {
  const std::string& uid = cd.metadata.uid;
  std::vector<DaemonPod> pods;
  for (const auto& p : pods_->ByIndex(kIndexByDomain, uid)) pods.push_back(DaemonPodFromPod(*p));
  // Every clique ID with a daemon pod, and every clique of the domain that exists.
  std::set<std::string> clique_ids;
  for (const DaemonPod& p : pods) {
    if (!p.non_fabric() && p.has_clique_label) clique_ids.insert(p.clique_id);
  }
  for (const auto& c : cliques_->ByIndex(kIndexByDomain, uid)) {
    auto it = c->metadata.labels.find(std::string(k8s::kComputeDomainCliqueLabel));
    if (it != c->metadata.labels.end() && !it->second.empty()) clique_ids.insert(it->second);
  }
  std::optional<std::vector<DaemonPod>> live_pods;  // listed once, when a removal needs it
  std::vector<ComputeDomainClique> out;
  absl::Status first_error;
  for (const std::string& clique_id : clique_ids) {
    absl::StatusOr<std::optional<ComputeDomainClique>> c =
        SyncClique(cd, clique_id, pods, &live_pods);
    if (!c.ok()) {
      // The other cliques still get their writes; the key is retried.
      if (first_error.ok()) first_error = c.status();
      continue;
    }
    if (c->has_value()) out.push_back(std::move(**c));
  }
  if (!first_error.ok()) return first_error;
  return out;
}

absl::StatusOr<std::optional<ComputeDomainClique>> Controller::SyncClique(
    const ComputeDomain& cd, const std::string& clique_id,
    const std::vector<DaemonPod>& cached_pods, std::optional<std::vector<DaemonPod>>* live_pods) {
  const std::string& uid = cd.metadata.uid;
  const std::string& ns = config_.driver_namespace;
  const std::string name = k8s::CliqueObjectName(uid, clique_id);
  const std::string key = absl::StrCat(ns, "/", name);
  std::shared_ptr<const ComputeDomainClique> known = KnownClique(key);
  if (known && DomainLabel(known->metadata) != uid) {
    return absl::FailedPreconditionError(
        absl::StrCat("ComputeDomainClique ", key, ": label ", k8s::kComputeDomainLabel, " is \"",
                     DomainLabel(known->metadata), "\", expected \"", uid, "\""));
  }
  std::map<std::string, int64_t> remembered;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = clique_indices_.find(key); it != clique_indices_.end()) remembered = it->second;
  }
  const std::vector<k8s::ComputeDomainDaemonInfo> none;
  const std::vector<k8s::ComputeDomainDaemonInfo>& existing = known ? known->daemons : none;
  CliqueDaemons desired = DesiredCliqueDaemons(existing, cached_pods, clique_id, remembered,
                                               config_.max_nodes_per_imex_domain);
  if (RemovesNodes(existing, desired.daemons)) {
    // The pod cache may lag behind the clique (another controller instance wrote it from a newer
    // view): only what the API server confirms is gone is removed.
    if (!live_pods->has_value()) {
      k8s::ListOptions selector{.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", uid)};
      ASSIGN_OR_RETURN(nlohmann::json live, client_->ListAll(k8s::Pod::kResource, ns, selector));
      std::vector<DaemonPod> listed;
      for (const nlohmann::json& item : live["items"]) {
        if (auto pod = k8s::Pod::FromJson(item); pod.ok()) listed.push_back(DaemonPodFromPod(*pod));
      }
      *live_pods = std::move(listed);
    }
    CliqueDaemons confirmed = DesiredCliqueDaemons(existing, **live_pods, clique_id, remembered,
                                                   config_.max_nodes_per_imex_domain);
    if (RemovesNodes(existing, confirmed.daemons)) {
      DRA_INFO("removing clique entries of nodes without a running daemon pod", "clique", key,
               "entries", existing.size(), "kept", confirmed.daemons.size());
    }
    desired = std::move(confirmed);
  }
  if (!desired.unplaced.empty()) {
    DRA_WARNING("no available indices within maxNodesPerIMEXDomain", "clique", key,
                "maxNodesPerIMEXDomain", config_.max_nodes_per_imex_domain, "unplaced",
                absl::StrJoin(desired.unplaced, ","));
  }
  if (desired.daemons.empty()) {
    // No daemon left: the clique goes (its owner references would also let the garbage
    // collector remove it, but not one whose pods are gone already).
    if (!known) return std::nullopt;
    k8s::DeleteOptions opts;
    opts.resource_version = known->metadata.resource_version;
    absl::Status deleted = client_->Delete(ComputeDomainClique::kResource, ns, name, opts);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return Annotate(deleted, absl::StrCat("delete empty ComputeDomainClique ", key));
    }
    ForgetClique(key);
    DRA_INFO("deleted ComputeDomainClique without daemons", "clique", key);
    return std::nullopt;
  }
  ComputeDomainClique next =
      CliqueObject(known ? *known : ComputeDomainClique{}, ns, uid, clique_id, desired);
  if (known && !CliqueDiffers(*known, next)) return std::optional<ComputeDomainClique>(*known);
  absl::StatusOr<nlohmann::json> written;
  if (known) {
    written = client_->Update(ComputeDomainClique::kResource, ns, next.ToJson());
  } else {
    nlohmann::json object = next.ToJson();
    if (object.contains("metadata")) {
      for (const char* k : {"resourceVersion", "uid", "creationTimestamp", "managedFields"}) {
        object["metadata"].erase(k);
      }
    }
    written = client_->Create(ComputeDomainClique::kResource, ns, object);
  }
  if (!written.ok()) {
    return Annotate(written.status(),
                    absl::StrCat(known ? "update" : "create", " ComputeDomainClique ", key));
  }
  ASSIGN_OR_RETURN(ComputeDomainClique result, ComputeDomainClique::FromJson(*written));
  RememberClique(result);
  DRA_VLOG(1, "wrote ComputeDomainClique", "clique", key, "daemons", result.daemons.size());
  return std::optional<ComputeDomainClique>(std::move(result));
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
  const std::string prefix = absl::StrCat(config_.driver_namespace, "/", uid, ".");
  for (auto it = clique_indices_.begin(); it != clique_indices_.end();) {
    it = absl::StartsWith(it->first, prefix) ? clique_indices_.erase(it) : std::next(it);
  }
  for (auto it = clique_written_.begin(); it != clique_written_.end();) {
    it = absl::StartsWith(it->first, prefix) ? clique_written_.erase(it) : std::next(it);
  }
  reported_.erase(uid);
  binding_labelled_.erase(uid);
  if (info_gauge_ == nullptr) return;
  auto it = statuses_.find(uid);
  if (it == statuses_.end()) return;
  info_gauge_->WithLabels({it->second})->Dec();
  statuses_.erase(it);
}

}  // namespace dra::cdcontroller
