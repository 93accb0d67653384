#pragma once

// ResourceSlices of a DynamicMIG inventory (docs/dynamic-mig.md "Slices"): devices that consume
// shared counters, laid out by the API server's version as the Go driver does:
//   combined (API server < 1.35.0): one slice per physical GPU with its counter set and devices;
//   split (>= 1.35.0): slice 0 holds every counter set and no device, then one device-only slice
//                      per physical GPU.
// GPUs are ordered by PCI bus id; a GPU's devices are in announcement order (DynamicMigOrder:
// the full GPU, then per profile its placements in the order of mig_placement.h), since the
// scheduler takes the first device of a slice that fits.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/api/consumable_shares.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/kubeletplugin/slice_publisher.h"

namespace dra::gpu {

enum class SliceLayout { kCombined, kSplit };

// The layout for an API server reporting `git_version` ("v1.36.3", "v1.34.0-rc.1+abc"):
// split from 1.35.0 on (pre-releases of 1.35.0 count as older). InvalidArgument naming the value
// when it is not a version.
absl::StatusOr<SliceLayout> SliceLayoutForServer(std::string_view git_version);

// The layout for the `/version` document of an API server (its "gitVersion" field).
absl::StatusOr<SliceLayout> SliceLayoutFromVersionJson(std::string_view version_json);

kubeletplugin::DriverResources BuildPartitionableResources(const Inventory& inventory,
                                                           const std::string& node_name,
                                                           const api::ConsumableShares& shares,
                                                           SliceLayout layout);

}  // namespace dra::gpu
