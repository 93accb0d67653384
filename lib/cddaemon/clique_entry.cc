#include "lib/cddaemon/clique_entry.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace dra::cddaemon {
namespace {

bool EnsureOwnerRef(k8s::ObjectMeta& meta, const DaemonIdentity& me) {
  for (const k8s::OwnerReference& ref : meta.owner_references) {
    if (ref.uid == me.pod_uid) return false;
  }
  k8s::OwnerReference ref;
  ref.api_version = "v1";
  ref.kind = "Pod";
  ref.name = me.pod_name;
  ref.uid = me.pod_uid;
  meta.owner_references.push_back(std::move(ref));
  return true;
}

}  // namespace

absl::StatusOr<int64_t> NextFreeIndex(const k8s::ComputeDomainClique& clique, int max_nodes) {
  std::set<int64_t> used;
  for (const k8s::ComputeDomainDaemonInfo& d : clique.daemons) used.insert(d.index);
  int64_t next = 0;
  while (used.contains(next)) ++next;
  if (next >= max_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no available indices within maxNodesPerIMEXDomain (", max_nodes, ")"));
  }
  return next;
}

absl::StatusOr<bool> UpsertOwnEntry(k8s::ComputeDomainClique& clique, const DaemonIdentity& me) {
  bool changed = false;
  k8s::ComputeDomainDaemonInfo* mine = nullptr;
  for (k8s::ComputeDomainDaemonInfo& d : clique.daemons) {
    if (d.node_name == me.node_name) mine = &d;
  }
  if (mine == nullptr) {
    absl::StatusOr<int64_t> index = NextFreeIndex(clique, me.max_nodes);
    if (!index.ok()) {
      return absl::Status(index.status().code(),
                          absl::StrCat("ComputeDomainClique ", clique.metadata.name, ": ",
                                       index.status().message()));
    }
    k8s::ComputeDomainDaemonInfo d;
    d.node_name = me.node_name;
    d.clique_id = me.clique_id;
    d.index = *index;
    d.status = std::string(k8s::kComputeDomainStatusNotReady);
    clique.daemons.push_back(std::move(d));
    mine = &clique.daemons.back();
    changed = true;
  }
  if (mine->ip_address != me.pod_ip) {
    mine->ip_address = me.pod_ip;
    changed = true;
  }
  if (mine->clique_id != me.clique_id) {
    mine->clique_id = me.clique_id;
    changed = true;
  }
  if (EnsureOwnerRef(clique.metadata, me)) changed = true;
  return changed;
}

absl::StatusOr<bool> SetOwnStatus(k8s::ComputeDomainClique& clique, absl::string_view node_name,
                                  absl::string_view status) {
  for (k8s::ComputeDomainDaemonInfo& d : clique.daemons) {
    if (d.node_name != node_name) continue;
    if (d.status == status) return false;
    d.status = std::string(status);
    return true;
  }
  return absl::NotFoundError(absl::StrCat("daemon info not yet listed in ComputeDomainClique ",
                                          clique.metadata.name, " (waiting for insertion)"));
}

bool RemoveOwnEntries(k8s::ComputeDomainClique& clique, absl::string_view pod_ip) {
  size_t before = clique.daemons.size();
  std::erase_if(clique.daemons,
                [&](const k8s::ComputeDomainDaemonInfo& d) { return d.ip_address == pod_ip; });
  return clique.daemons.size() != before;
}

k8s::ComputeDomainClique NewClique(absl::string_view namespace_name, absl::string_view cd_uid,
                                   const DaemonIdentity& me) {
  k8s::ComputeDomainClique c;
  c.metadata.name = k8s::CliqueObjectName(cd_uid, me.clique_id);
  c.metadata.namespace_name = std::string(namespace_name);
  c.metadata.labels[std::string(k8s::kComputeDomainLabel)] = std::string(cd_uid);
  c.metadata.labels[std::string(k8s::kComputeDomainCliqueLabel)] = me.clique_id;
  EnsureOwnerRef(c.metadata, me);
  return c;
}

}  // namespace dra::cddaemon
