#pragma once

// /etc/hosts maintenance for DNS-name mode: the daemon maps compute-domain-daemon-NNNN to the pod
// IPs of the daemons of its own clique, so that nvidia-imex resolves the static nodes file.
//
// Unlike the Go daemon, the rewrite is idempotent: every line that names a daemon DNS name, and
// our begin/end markers, are dropped, and one block (sorted by name) is appended. Other lines are
// kept byte for byte, so repeated rewrites neither grow the file nor disturb the kubelet's lines.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

inline constexpr absl::string_view kHostsBlockBegin =
    "# BEGIN compute-domain-daemon mappings (maintained by compute-domain-daemon)";
inline constexpr absl::string_view kHostsBlockEnd = "# END compute-domain-daemon mappings";

// DNS name -> IP. std::map keeps the names sorted, which is the order of the hosts lines.
using DnsMappings = std::map<std::string, std::string>;

// The mappings for the daemons of `clique_id` (others are ignored). An index outside
// [0, max_nodes) is an error naming the node and the index.
absl::StatusOr<DnsMappings> BuildDnsMappings(
    const std::vector<k8s::ComputeDomainDaemonInfo>& daemons, absl::string_view clique_id,
    int max_nodes);

// `existing` without any earlier daemon lines, plus our block for `mappings` (no block when
// empty). Render(Render(x, m), m) == Render(x, m).
std::string RenderHostsFile(absl::string_view existing, const DnsMappings& mappings);

// Rewrites `path` with RenderHostsFile (no write when nothing changes). First tries an atomic
// replace (temp file + rename). In a pod /etc/hosts is a file bind-mounted by the kubelet, and a
// rename over a mount point fails (EBUSY), so it then writes in place: the new bytes at offset 0,
// then ftruncate to the new length, then fsync. A concurrent reader could see the new bytes
// followed by a stale tail for that instant; the only reader that matters, nvidia-imex, resolves
// again only when we SIGUSR1 it after this returns. When `in_place` is given, *in_place true
// skips the atomic attempt, and an atomic replace that failed where the in-place write worked
// sets it (a mount stays a mount).
// Thread-compatible: one writer at a time.
absl::Status UpdateHostsFile(const std::string& path, const DnsMappings& mappings,
                             bool* in_place = nullptr);

// The in-place write alone (exposed for tests).
absl::Status WriteFileInPlace(const std::string& path, absl::string_view contents);

}  // namespace dra::cddaemon
