#include "lib/cddaemon/cd_status_entry.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace dra::cddaemon {

absl::StatusOr<int64_t> NextFreeNodeIndex(const std::vector<k8s::ComputeDomainNode>& nodes,
                                          absl::string_view clique_id, int max_nodes) {
  std::set<int64_t> used;
  for (const k8s::ComputeDomainNode& n : nodes) {
    if (n.clique_id == clique_id) used.insert(n.index);
  }
  int64_t next = 0;
  while (used.contains(next)) ++next;
  if (!clique_id.empty() && next >= max_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no available indices within maxNodesPerIMEXDomain (", max_nodes, ")"));
  }
  return next;
}

absl::StatusOr<bool> UpsertOwnNode(k8s::ComputeDomain& cd, const DaemonIdentity& me) {
  k8s::ComputeDomainNode* mine = nullptr;
  for (k8s::ComputeDomainNode& n : cd.status.nodes) {
    if (n.name == me.node_name) mine = &n;
  }
  bool changed = false;
  if (mine == nullptr) {
    absl::StatusOr<int64_t> index = NextFreeNodeIndex(cd.status.nodes, me.clique_id, me.max_nodes);
    if (!index.ok()) {
      return absl::Status(index.status().code(),
                          absl::StrCat("ComputeDomain ", cd.metadata.namespace_name, "/",
                                       cd.metadata.name, ": ", index.status().message()));
    }
    k8s::ComputeDomainNode n;
    n.name = me.node_name;
    n.clique_id = me.clique_id;
    n.index = *index;
    n.status = std::string(k8s::kComputeDomainStatusNotReady);
    cd.status.nodes.push_back(std::move(n));
    mine = &cd.status.nodes.back();
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
  return changed;
}

absl::StatusOr<bool> SetOwnNodeStatus(k8s::ComputeDomain& cd, absl::string_view node_name,
                                      absl::string_view status) {
  for (k8s::ComputeDomainNode& n : cd.status.nodes) {
    if (n.name != node_name) continue;
    if (n.status == status) return false;
    n.status = std::string(status);
    return true;
  }
  return absl::NotFoundError(absl::StrCat("node info not yet listed in ComputeDomain ",
                                          cd.metadata.namespace_name, "/", cd.metadata.name,
                                          " status (waiting for insertion)"));
}

bool RemoveOwnNodes(k8s::ComputeDomain& cd, absl::string_view pod_ip) {
  size_t before = cd.status.nodes.size();
  std::erase_if(cd.status.nodes,
                [&](const k8s::ComputeDomainNode& n) { return n.ip_address == pod_ip; });
  return cd.status.nodes.size() != before;
}

std::vector<k8s::ComputeDomainDaemonInfo> SameCliqueDaemons(
    const std::vector<k8s::ComputeDomainNode>& nodes, absl::string_view clique_id) {
  std::vector<k8s::ComputeDomainDaemonInfo> out;
  for (const k8s::ComputeDomainNode& n : nodes) {
    if (n.clique_id != clique_id) continue;
    k8s::ComputeDomainDaemonInfo d;
    d.node_name = n.name;
    d.ip_address = n.ip_address;
    d.clique_id = n.clique_id;
    d.index = n.index;
    d.status = n.status;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace dra::cddaemon
