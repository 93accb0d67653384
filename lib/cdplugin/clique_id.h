#pragma once

// The node's NVLink clique ID, "<clusterUUID>.<cliqueID>" (docs/compute-domains.md), from the
// fabric info NVML reports for every GPU. "" on a node without multi-node NVLink.
//
// Strict rules (CrashOnNVLinkFabricErrors, the default), per GPU:
//   fabric query NOT_SUPPORTED, or state NOT_SUPPORTED       -> no contribution
//   any other query error                                    -> error
//   state != COMPLETED                                       -> error ("not attached")
//   status != 0                                              -> error ("registration error")
//   all-zero cluster UUID                                    -> no contribution (NVLink, no MNNVL)
// Lenient rules (the gate off): a GPU whose fabric is not completed, or whose query fails with
// NOT_SUPPORTED, contributes nothing; other query errors are still errors.
// Then: no contribution gives ""; contributions must agree on one cluster UUID and one clique ID,
// otherwise it is an error naming every distinct value and the GPUs that reported it.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/nvml/nvml.h"

namespace dra::cdplugin {

// What one GPU reported.
struct GpuFabric {
  std::string gpu;                          // its UUID (or index), for messages
  absl::StatusOr<nvml::FabricInfo> fabric;  // the query's result
};

// Aggregates per the rules above. Pure; the unit-tested core.
absl::StatusOr<std::string> CliqueIdFromFabric(const std::vector<GpuFabric>& gpus, bool strict);

// Opens an NVML session on `nvml`, queries every GPU and aggregates.
absl::StatusOr<std::string> DiscoverCliqueId(const nvml::Nvml& nvml, bool strict);

}  // namespace dra::cdplugin
