#pragma once

// The daemon list of a ComputeDomainClique as the controller, its only writer, keeps it: a pure
// function of the clique as last seen and the domain's daemon pods (docs/compute-domains.md,
// "At scale": one writer per object). Each IMEX daemon only labels its own pod with its clique
// ID; its entry is {node, pod IP, clique ID, index, Ready/NotReady from the pod's Ready
// condition}. Indices are assigned here and are stable: a node keeps the index it holds while its
// daemon pod exists, and takes back the index it held last (`remembered`) when the clique was
// deleted meanwhile.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/cdcontroller/status.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cdcontroller {

struct CliqueDaemons {
  // Sorted by index; every index distinct and in [0, max_nodes).
  std::vector<k8s::ComputeDomainDaemonInfo> daemons;
  // The daemon pods the entries come from, in the order of `daemons` (owner references).
  std::vector<const DaemonPod*> pods;
  // Nodes of the clique that got no index: all max_nodes indices are held.
  std::vector<std::string> unplaced;
};

// The members of clique `clique_id` are the pods of `pods` labelled with that (non-empty) clique
// ID, not terminating, with a node and a pod IP (the first pod of a node wins). Index order of
// preference: the index the node's entry in `existing` is entitled to (k8s::ResolvedIndices, so a
// list written by daemons of an earlier version is resolved the way they read it), then the
// node's `remembered` index, then, for the rest in node-name order, the smallest free index.
CliqueDaemons DesiredCliqueDaemons(const std::vector<k8s::ComputeDomainDaemonInfo>& existing,
                                   const std::vector<DaemonPod>& pods, const std::string& clique_id,
                                   const std::map<std::string, int64_t>& remembered, int max_nodes);

// Whether `desired` drops a node that `existing` lists (removal is confirmed against a live pod
// list before it is written: the pod cache may lag).
bool RemovesNodes(const std::vector<k8s::ComputeDomainDaemonInfo>& existing,
                  const std::vector<k8s::ComputeDomainDaemonInfo>& desired);

// The clique object to write: `base` (the clique as last seen; empty metadata for a new one) with
// its name, both labels, `desired`'s daemons and one owner reference per pod (other owners kept).
k8s::ComputeDomainClique CliqueObject(k8s::ComputeDomainClique base, const std::string& ns,
                                      const std::string& cd_uid, const std::string& clique_id,
                                      const CliqueDaemons& desired);

// Whether writing `next` over `current` changes anything the controller manages.
bool CliqueDiffers(const k8s::ComputeDomainClique& current, const k8s::ComputeDomainClique& next);

}  // namespace dra::cdcontroller
