#pragma once

// The ResourceSlice content of the GPU driver (spec gpu-driver.md 2.8): one pool named after the
// node, devices in name order, split into slices of at most 128 devices (the API limit). An empty
// inventory still publishes one empty slice: "no devices" is a state, "no pool" is not knowing.

#include <string>

#include "lib/gpu/inventory.h"
#include "lib/kubeletplugin/slice_publisher.h"

namespace dra::gpu {

inline constexpr size_t kMaxDevicesPerSlice = 128;

kubeletplugin::DriverResources BuildDriverResources(const Inventory& inventory,
                                                    const std::string& node_name);

}  // namespace dra::gpu
