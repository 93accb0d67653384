// Controller: the deletion of a ComputeDomain through its finalizer, and the cleanup of objects and
// node labels of domains that no longer exist. These paths list live from the API server rather
// than trusting the caches: they run rarely, and deleting on a stale cache would be worse than a
// few extra requests.

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "lib/cdcontroller/controller.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/wire_decode.h"

namespace dra::cdcontroller {
namespace {

using k8s::ComputeDomain;

struct Target {
  const k8s::ResourceInfo* r;
  std::string ns;
  bool operator<(const Target& o) const {
    return std::tie(r->plural, ns) < std::tie(o.r->plural, o.ns);
  }
};

k8s::ListOptions ByDomain(const std::string& uid) {
  return {.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", uid)};
}

std::string ObjectName(const Target& t, const k8s::ObjectMeta& m) {
  return absl::StrCat(t.r->kind, " ", m.namespace_name, "/", m.name);
}

// Deletes the object unless it is already being deleted (the uid precondition spares a newer
// object of the same name).
absl::Status DeleteIfLive(k8s::Client* client, const Target& t, const k8s::ObjectMeta& m) {
  if (m.deletion_timestamp.has_value()) return absl::OkStatus();
  absl::Status s = client->Delete(*t.r, m.namespace_name, m.name,
                                  {.uid = m.uid, .propagation_policy = "Background"});
  if (absl::IsNotFound(s)) return absl::OkStatus();
  if (!s.ok()) return Annotate(s, absl::StrCat("delete ", ObjectName(t, m)));
  DRA_INFO("deleted object", "object", ObjectName(t, m));
  return absl::OkStatus();
}

// An object as listed: its metadata decoded, and the whole object for a write-back.
struct Listed {
  k8s::ObjectMeta meta;
  nlohmann::json object;
};

// Drops our finalizer from an object that is being deleted: an Update of the listed object, whose
// resourceVersion is the precondition (a concurrent change makes it a Conflict, retried).
absl::Status RemoveFinalizer(k8s::Client* client, const Target& t, const Listed& o) {
  const k8s::ObjectMeta& m = o.meta;
  std::vector<std::string> rest;
  for (const std::string& f : m.finalizers) {
    if (f != k8s::kComputeDomainFinalizer) rest.push_back(f);
  }
  if (rest.size() == m.finalizers.size()) return absl::OkStatus();
  if (!m.deletion_timestamp.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "not removing the finalizer of ", ObjectName(t, m), " before it is marked for deletion"));
  }
  nlohmann::json next = o.object;
  next["metadata"]["finalizers"] = rest;
  absl::StatusOr<nlohmann::json> r = client->Update(*t.r, m.namespace_name, next);
  if (absl::IsNotFound(r.status())) return absl::OkStatus();
  if (!r.ok()) return Annotate(r.status(), absl::StrCat("remove finalizer of ", ObjectName(t, m)));
  return absl::OkStatus();
}

// The objects of `t` labelled with `uid`, listed live. One that cannot be read whole
// (k8s::UndecodableObject) fails the list, naming it: it can be neither updated from what was
// read nor left out, or the domain would be released with it still there.
absl::StatusOr<std::vector<Listed>> ListLabelled(k8s::Client* client, const Target& t,
                                                 const std::string& uid) {
  ASSIGN_OR_RETURN(k8s::ListPage list, client->ListAllOf(*t.r, t.ns, ByDomain(uid)));
  for (const k8s::UndecodableObject& u : list.undecodable) {
    k8s::ReportUndecodable(*t.r, u);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot clean up ", t.r->kind, " ", k8s::KeyOf(u), " of ComputeDomain ", uid,
        ": the object cannot be read (", u.reason, "); delete it or remove its finalizer by hand"));
  }
  std::vector<Listed> out;
  for (nlohmann::json& item : list.items) {
    ASSIGN_OR_RETURN(k8s::ObjectMeta m,
                     k8s::ObjectMeta::FromJson(json_access::MemberOrNull(item, "metadata")));
    // List items carry no apiVersion/kind; an Update needs them.
    item["apiVersion"] = k8s::ApiVersion(*t.r);
    item["kind"] = std::string(t.r->kind);
    out.push_back({std::move(m), std::move(item)});
  }
  return out;
}

// Deletes every object of `targets` labelled `uid`, then drops the finalizers; OK once all are
// gone, Unavailable while some remain (the caller retries).
absl::Status DrainObjects(k8s::Client* client, const std::set<Target>& targets,
                          const std::string& uid) {
  for (const Target& t : targets) {
    ASSIGN_OR_RETURN(std::vector<Listed> objs, ListLabelled(client, t, uid));
    for (const Listed& o : objs) RETURN_IF_ERROR(DeleteIfLive(client, t, o.meta));
  }
  return absl::OkStatus();
}

absl::Status FinalizeObjects(k8s::Client* client, const std::set<Target>& targets,
                             const std::string& uid) {
  for (const Target& t : targets) {
    ASSIGN_OR_RETURN(std::vector<Listed> objs, ListLabelled(client, t, uid));
    for (const Listed& o : objs) RETURN_IF_ERROR(RemoveFinalizer(client, t, o));
  }
  // Objects whose finalizer just went are normally gone now; check before the domain lets go.
  std::vector<std::string> remaining;
  for (const Target& t : targets) {
    ASSIGN_OR_RETURN(std::vector<Listed> objs, ListLabelled(client, t, uid));
    for (const Listed& o : objs) remaining.push_back(ObjectName(t, o.meta));
  }
  if (!remaining.empty()) {
    return absl::UnavailableError(absl::StrCat("waiting for ", remaining.size(),
                                               " object(s) to be removed, first ", remaining[0]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::set<std::string>> Controller::LiveDomainUids() {
  // A domain that cannot be read whole is live all the same: its objects are not garbage.
  ASSIGN_OR_RETURN(k8s::ListPage list, client_->ListAllOf(ComputeDomain::kResource, ""));
  std::set<std::string> uids;
  for (const nlohmann::json& item : list.items) {
    std::string uid = json_access::StringOr(json_access::MemberOrNull(item, "metadata"), "uid");
    if (!uid.empty()) uids.insert(std::move(uid));
  }
  for (const k8s::UndecodableObject& u : list.undecodable) {
    k8s::ReportUndecodable(ComputeDomain::kResource, u);
    if (!u.uid.empty()) uids.insert(u.uid);
  }
  return uids;
}

absl::Status Controller::RemoveNodeLabels(const std::string& uid) {
  return internal::RemoveNodeLabels(client_, uid);
}

namespace internal {

absl::Status RemoveNodeLabels(k8s::Client* client, const std::string& uid) {
  ASSIGN_OR_RETURN(nlohmann::json list, client->ListAll(k8s::Node::kResource, "", ByDomain(uid)));
  // ListAll answers in a checked shape (lib/k8s/wire_decode.h): items is an array of objects.
  for (nlohmann::json& node : list["items"]) {
    const nlohmann::json& meta = json_access::MemberOrNull(node, "metadata");
    const std::string name = json_access::StringOr(meta, "name");
    if (name.empty() || !json_access::MemberOrNull(meta, "labels").is_object()) continue;
    // An Update with the listed resourceVersion: a label the plugin set meanwhile (for another
    // domain) makes it a Conflict instead of being removed.
    node["apiVersion"] = "v1";
    node["kind"] = "Node";
    node["metadata"]["labels"].erase(std::string(k8s::kComputeDomainLabel));
    absl::StatusOr<nlohmann::json> r = client->Update(k8s::Node::kResource, "", node);
    if (absl::IsNotFound(r.status())) continue;
    if (!r.ok()) {
      return Annotate(r.status(),
                      absl::StrCat("remove label ", k8s::kComputeDomainLabel, " from node ", name));
    }
    DRA_INFO("removed node label", "node", name, "computeDomain", uid);
  }
  return absl::OkStatus();
}

absl::Status RemoveDomainObjects(k8s::Client* client, const std::string& uid,
                                 const std::string& domain_namespace,
                                 const std::vector<std::string>& daemon_namespaces) {
  // Order: the workload's claim template first (no new workload pods), then the daemons' objects,
  // then the node labels, then the finalizers of the objects.
  std::set<Target> workload = {{&k8s::ResourceClaimTemplate::kResource, domain_namespace}};
  std::set<Target> daemons;
  for (const std::string& ns : daemon_namespaces) {
    daemons.insert({&k8s::ResourceClaimTemplate::kResource, ns});
    daemons.insert({&k8s::DaemonSet::kResource, ns});
    // The daemons' cliques. Each is also owned by its daemon pods (garbage-collected after the
    // last one), but a clique whose pods are gone already, or that a daemon re-created while
    // shutting down, would otherwise outlive its domain. A re-created one is deleted again on
    // the next pass: FinalizeObjects waits until none is left.
    daemons.insert({&k8s::ComputeDomainClique::kResource, ns});
  }
  std::set<Target> all = workload;
  all.insert(daemons.begin(), daemons.end());
  RETURN_IF_ERROR(DrainObjects(client, workload, uid));
  RETURN_IF_ERROR(DrainObjects(client, daemons, uid));
  if (!daemon_namespaces.empty()) RETURN_IF_ERROR(RemoveNodeLabels(client, uid));
  return FinalizeObjects(client, all, uid);
}

}  // namespace internal

absl::Status Controller::FinalizeDomain(const ComputeDomain& cd) {
  const std::string& uid = cd.metadata.uid;
  const bool has_finalizer =
      std::find(cd.metadata.finalizers.begin(), cd.metadata.finalizers.end(),
                k8s::kComputeDomainFinalizer) != cd.metadata.finalizers.end();
  if (!has_finalizer) return absl::OkStatus();
  // The domain's objects first (internal::RemoveDomainObjects), then the domain's finalizer.
  RETURN_IF_ERROR(internal::RemoveDomainObjects(
      client_, uid, cd.metadata.namespace_name,
      config_.host_managed() ? std::vector<std::string>() : DaemonSetNamespaces()));

  std::vector<std::string> rest;
  for (const std::string& f : cd.metadata.finalizers) {
    if (f != k8s::kComputeDomainFinalizer) rest.push_back(f);
  }
  nlohmann::json patch = {
      {"metadata", {{"resourceVersion", cd.metadata.resource_version}, {"finalizers", rest}}}};
  {
    // Before the patch: the informer may report the deletion before the patch returns.
    absl::MutexLock lock(&mu_);
    finalizing_.insert(uid);
  }
  absl::StatusOr<nlohmann::json> r = client_->MergePatch(
      ComputeDomain::kResource, cd.metadata.namespace_name, cd.metadata.name, patch);
  if (absl::IsNotFound(r.status())) {  // finalized by an earlier pass
    if (domains_->ByIndex(internal::kIndexByUid, uid).empty()) {
      absl::MutexLock lock(&mu_);
      finalizing_.erase(uid);  // its deletion was seen already: no handler will drop the entry
    }
    return absl::OkStatus();
  }
  if (!r.ok()) {
    absl::MutexLock lock(&mu_);
    finalizing_.erase(uid);
    return Annotate(r.status(), absl::StrCat("remove finalizer of ComputeDomain ",
                                             cd.metadata.namespace_name, "/", cd.metadata.name));
  }
  DRA_INFO("finalized ComputeDomain", "computeDomain",
           absl::StrCat(cd.metadata.namespace_name, "/", cd.metadata.name), "uid", uid);
  ForgetStatus(uid);
  return absl::OkStatus();
}

void Controller::OnDomainDeleted(const ComputeDomain& last) {
  const std::string& uid = last.metadata.uid;
  auto has_ours = [](const ComputeDomain& cd) {
    return std::find(cd.metadata.finalizers.begin(), cd.metadata.finalizers.end(),
                     k8s::kComputeDomainFinalizer) != cd.metadata.finalizers.end();
  };
  bool vanished = false;
  {
    absl::MutexLock lock(&mu_);
    // Our own finalizer patch may be newer than the informer's last copy.
    auto w = written_.find(uid);
    const bool carried = has_ours(last) || (w != written_.end() && has_ours(*w->second.second));
    const bool finalized_by_us = finalizing_.erase(uid) > 0;
    if (carried && !finalized_by_us) {
      vanished_[uid] = last.metadata.namespace_name;
      vanished = true;
    }
  }
  ForgetStatus(uid);
  if (!vanished) return;
  DRA_WARNING(
      "ComputeDomain disappeared with the controller's finalizer still on it (the API server "
      "deleted it while the finalizer was being added, kubernetes/kubernetes#77988, or someone "
      "else removed the finalizer); removing its objects",
      "computeDomain", absl::StrCat(last.metadata.namespace_name, "/", last.metadata.name), "uid",
      uid);
  if (vanished_counter_ != nullptr) vanished_counter_->Inc();
  EnqueueDomain(uid);
}

absl::Status Controller::CleanUpVanishedDomain(const std::string& uid,
                                               const std::string& domain_namespace) {
  RETURN_IF_ERROR(internal::RemoveDomainObjects(
      client_, uid, domain_namespace,
      config_.host_managed() ? std::vector<std::string>() : DaemonSetNamespaces()));
  DRA_INFO("removed the objects of a vanished ComputeDomain", "uid", uid);
  absl::MutexLock lock(&mu_);
  vanished_.erase(uid);
  return absl::OkStatus();
}

absl::Status Controller::CollectGarbage() {
  std::map<std::string, std::set<Target>> stale;  // domain uid -> where its objects are
  auto scan = [&](const auto& informer, const k8s::ResourceInfo& r) {
    if (!informer) return;
    for (const auto& obj : informer->List()) {
      auto it = obj->metadata.labels.find(std::string(k8s::kComputeDomainLabel));
      if (it == obj->metadata.labels.end() || DomainByUid(it->second)) continue;
      stale[it->second].insert({&r, obj->metadata.namespace_name});
    }
  };
  for (const auto& ds : daemonsets_) scan(ds, k8s::DaemonSet::kResource);
  scan(daemon_rcts_, k8s::ResourceClaimTemplate::kResource);
  scan(workload_rcts_, k8s::ResourceClaimTemplate::kResource);
  if (stale.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::set<std::string> live, LiveDomainUids());
  absl::Status result;
  for (const auto& [uid, targets] : stale) {
    if (live.contains(uid)) continue;
    DRA_INFO("cleaning up objects of a ComputeDomain that no longer exists", "uid", uid);
    absl::Status s = DrainObjects(client_, targets, uid);
    if (s.ok()) s = FinalizeObjects(client_, targets, uid);
    if (!s.ok()) result.Update(s);
  }
  return result;
}

absl::Status Controller::CleanupStaleNodeLabels() {
  if (!nodes_) return absl::OkStatus();
  std::set<std::string> candidates;
  for (const auto& node : nodes_->List()) {
    auto it = node->metadata.labels.find(std::string(k8s::kComputeDomainLabel));
    if (it == node->metadata.labels.end() || DomainByUid(it->second)) continue;
    if (config_.node_label_cleanup_filter && !config_.node_label_cleanup_filter(it->second)) {
      continue;
    }
    candidates.insert(it->second);
  }
  if (candidates.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::set<std::string> live, LiveDomainUids());
  absl::Status result;
  for (const std::string& uid : candidates) {
    if (live.contains(uid)) continue;
    DRA_INFO("removing node labels of a ComputeDomain that no longer exists", "uid", uid);
    result.Update(RemoveNodeLabels(uid));
  }
  return result;
}

}  // namespace dra::cdcontroller
