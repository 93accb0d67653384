#pragma once

// Pure edits of a ComputeDomainClique on behalf of one daemon (spec "Registration into the
// clique"): each daemon touches only its own entry (found by node name) and the owner reference to
// its own pod. No I/O; CliqueRegistrar sends the results to the API server.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/objects_compute_domain.h"
#include "nlohmann/json.hpp"

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

// --- Registration without a resourceVersion precondition (CliqueRegistrar) ---
//
// A daemon's writes touch only its own entry, so they are sent as RFC 6902 JSON patches applied to
// whatever the clique holds when they arrive: appends and position-guarded replacements instead of
// whole-object updates that lose to every concurrent write (docs/compute-domains.md, "At scale").

// What this daemon wants its entry to say. `status` unset: keep what the entry says (NotReady for a
// new entry). `preferred_index` >= 0: the index to take when free (the one held before the clique
// was deleted or the entry lost).
struct OwnEntryWish {
  std::optional<std::string> status;
  int64_t preferred_index = -1;
};

// The JSON patch operations that bring `clique` (as last seen) to hold this daemon's entry as
// wished, plus the owner reference to its pod; an empty array when nothing is to change:
// - no entry: append one with the preferred index when no entry uses it, else the smallest free
//   index (ResourceExhausted "no available indices within maxNodesPerIMEXDomain (N)" when that is
//   >= max_nodes);
// - an entry at position p: "test" that p still holds this node, then "replace" it when its IP,
//   clique ID, status or index differ, the index being its k8s::ResolvedIndices value (so a daemon
//   that appended the same index as an earlier entry moves to a free one);
// - where the patch must create a missing list (no daemons, no owner references) a "test" of the
//   resourceVersion guards it instead, since an "add" of a whole list would replace a list that
//   another daemon created meanwhile.
absl::StatusOr<nlohmann::json> OwnEntryPatch(const k8s::ComputeDomainClique& clique,
                                             const DaemonIdentity& me, const OwnEntryWish& wish);

// Operations removing every entry whose IP is `pod_ip`, each guarded by a "test" of that IP at its
// position (highest position first, so that earlier positions stay valid); empty when none.
nlohmann::json RemoveOwnEntriesPatch(const k8s::ComputeDomainClique& clique,
                                     absl::string_view pod_ip);

// The clique to create when it is missing: both labels, the owner reference to the pod and only
// this daemon's entry (the preferred index when in range, else 0), without the fields the server
// sets. Sent as a plain create; a daemon that loses the race to create it (AlreadyExists) reads
// the clique and appends its entry by OwnEntryPatch.
nlohmann::json NewCliqueWithOwnEntry(absl::string_view namespace_name, absl::string_view cd_uid,
                                     const DaemonIdentity& me, const OwnEntryWish& wish);

}  // namespace dra::cddaemon
