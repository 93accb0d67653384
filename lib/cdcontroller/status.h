#pragma once

// The ComputeDomain status as a pure function of what the informers hold: status.nodes from the
// domain's cliques (fabric nodes; clique_sync.h) and its daemon pods labelled with an empty clique
// ID (non-fabric nodes), and status.status from the nodes and spec.numNodes.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"

namespace dra::cdcontroller {

// What the controller needs of an IMEX daemon pod.
struct DaemonPod {
  std::string cd_uid;     // label resource.nvidia.com/computeDomain
  bool has_clique_label;  // label resource.nvidia.com/computeDomain.cliqueID present
  std::string clique_id;  // its value
  std::string node_name;  // spec.nodeName
  std::string pod_ip;     // status.podIP
  std::string pod_name;   // metadata.name
  std::string pod_uid;    // metadata.uid
  bool ready;             // condition Ready is True
  bool terminating;       // metadata.deletionTimestamp set

  // A daemon that labelled its pod with an empty clique ID runs on a node without NVLink fabric:
  // no IMEX daemon, no clique entry; the pod's readiness is the node's status.
  bool non_fabric() const { return has_clique_label && clique_id.empty(); }
};

DaemonPod DaemonPodFromPod(const k8s::Pod& pod);

// status.nodes, sorted by name: every settled daemon entry (k8s::SettledDaemons) of `cliques` (all
// of one domain; NotReady where the node's fabric daemon pod is not Ready), then a node
// {name, pod IP, cliqueID "", index -1, Ready|NotReady} for each non-fabric pod with a node and an
// IP. A node listed twice keeps its first entry (cliques in name order, then pods).
std::vector<k8s::ComputeDomainNode> BuildNodes(std::vector<const k8s::ComputeDomainClique*> cliques,
                                               const std::vector<DaemonPod>& pods);

// status.status: Ready in hostManaged mode; NotReady with fewer nodes than num_nodes or any node
// NotReady (an empty node status does not count as NotReady); Ready otherwise.
std::string GlobalStatus(int64_t num_nodes, const std::vector<k8s::ComputeDomainNode>& nodes,
                         bool host_managed);

// Equal as maps keyed by node name (order does not matter).
bool SameNodes(const std::vector<k8s::ComputeDomainNode>& a,
               const std::vector<k8s::ComputeDomainNode>& b);

}  // namespace dra::cdcontroller
