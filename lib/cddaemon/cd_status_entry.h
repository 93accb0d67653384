#pragma once

// Pure edits of ComputeDomain.status.nodes on behalf of one daemon, for the legacy path without
// cliques (ComputeDomainCliques=false; spec "ComputeDomainStatusManager"): each daemon touches only
// its own node's entry; indices are allocated among the nodes of the same clique ID, and a node
// keeps its index when its pod IP changes.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/cddaemon/registrar.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

// The smallest index >= 0 unused among nodes of `clique_id`. With a non-empty clique ID an index
// >= max_nodes is ResourceExhausted "no available indices within maxNodesPerIMEXDomain (N)"; an
// empty clique ID has no limit.
absl::StatusOr<int64_t> NextFreeNodeIndex(const std::vector<k8s::ComputeDomainNode>& nodes,
                                          absl::string_view clique_id, int max_nodes);

// Own entry (by node name) with the current IP; a new one gets the next free index and NotReady.
absl::StatusOr<bool> UpsertOwnNode(k8s::ComputeDomain& cd, const DaemonIdentity& me);
// NotFound "... (waiting for insertion)" when the own entry is absent.
absl::StatusOr<bool> SetOwnNodeStatus(k8s::ComputeDomain& cd, absl::string_view node_name,
                                      absl::string_view status);
bool RemoveOwnNodes(k8s::ComputeDomain& cd, absl::string_view pod_ip);

// The nodes of `clique_id`, as clique entries, in list order.
std::vector<k8s::ComputeDomainDaemonInfo> SameCliqueDaemons(
    const std::vector<k8s::ComputeDomainNode>& nodes, absl::string_view clique_id);

}  // namespace dra::cddaemon
