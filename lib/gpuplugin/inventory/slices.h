#pragma once

// The ResourceSlice content of the GPU driver (docs/compatibility.md "ResourceSlices"): one pool
// named after the node, devices in name order, split into slices of at most 128 devices (the API
// limit). An empty inventory still publishes one empty slice: "no devices" is a state, "no pool" is
// not knowing.
//
// Consumable shares (--consumable-shares, gate ConsumableShares; Kubernetes DRAConsumableCapacity)
// make full GPUs and MIG devices (not VFIO devices) allocatable to several claims at once:
// allowMultipleAllocations: true, and the `memory` capacity (rounded down to a multiple of 1Mi)
// gets a requestPolicy that the scheduler applies to each claim's share:
//   memory     default = all memory, validRange {min 1Mi, max memory, step 1Mi}
//   unlimited  default = 0,          validRange {min 0,   max memory, step 1Mi}
//   N          memory as unlimited, plus capacity `shares` = N with default 1,
//              validRange {min 1, max N, step 1}

#include <string>

#include "lib/api/consumable_shares.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/kubeletplugin/slice_publisher.h"

namespace dra::gpu {

inline constexpr size_t kMaxDevicesPerSlice = 128;

kubeletplugin::DriverResources BuildDriverResources(const Inventory& inventory,
                                                    const std::string& node_name,
                                                    const api::ConsumableShares& shares = {});

// `device` as published under `shares` (unchanged when disabled or for VFIO devices).
k8s::Device WithConsumableShares(const AllocatableDevice& device,
                                 const api::ConsumableShares& shares);

}  // namespace dra::gpu
