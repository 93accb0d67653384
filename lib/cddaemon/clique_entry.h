#pragma once

// Pure edits of a ComputeDomainClique on behalf of one daemon (spec "Registration into the
// clique"): each daemon touches only its own entry (found by node name) and the owner reference to
// its own pod. No I/O; CliqueRegistrar sends the results to the API server.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

// Who this daemon is.
struct DaemonIdentity {
  std::string node_name;
  std::string pod_ip;
  std::string pod_name;
  std::string pod_uid;
  std::string clique_id;
  int max_nodes = 0;
};

// The smallest index >= 0 no entry of `clique` uses. ResourceExhausted
// "no available indices within maxNodesPerIMEXDomain (N)" when it would be >= max_nodes.
absl::StatusOr<int64_t> NextFreeIndex(const k8s::ComputeDomainClique& clique, int max_nodes);

// Makes sure `clique` has this daemon's entry with its current pod IP (a new entry gets the next
// free index and status NotReady; an existing one keeps its index, so its DNS name stays stable
// when the pod is recreated with another IP) and an owner reference to its pod. Returns whether
// anything changed.
absl::StatusOr<bool> UpsertOwnEntry(k8s::ComputeDomainClique& clique, const DaemonIdentity& me);

// Sets the status ("Ready"/"NotReady") of the entry of `node_name`. NotFound
// "daemon info not yet listed in ComputeDomainClique <name> (waiting for insertion)" when absent.
absl::StatusOr<bool> SetOwnStatus(k8s::ComputeDomainClique& clique, absl::string_view node_name,
                                  absl::string_view status);

// Removes every entry whose IP is `pod_ip` (at shutdown). Returns whether any was removed.
bool RemoveOwnEntries(k8s::ComputeDomainClique& clique, absl::string_view pod_ip);

// A new clique object for `me`: name CliqueObjectName, both labels, owner reference to the pod,
// no daemons yet.
k8s::ComputeDomainClique NewClique(absl::string_view namespace_name, absl::string_view cd_uid,
                                   const DaemonIdentity& me);

}  // namespace dra::cddaemon
