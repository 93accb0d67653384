#include "lib/gpu/slices.h"

namespace dra::gpu {

kubeletplugin::DriverResources BuildDriverResources(const Inventory& inventory,
                                                    const std::string& node_name) {
  kubeletplugin::Pool pool;
  kubeletplugin::SliceContent slice;
  for (const AllocatableDevice& d : inventory.devices) {
    if (slice.devices.size() == kMaxDevicesPerSlice) {
      pool.slices.push_back(std::move(slice));
      slice = {};
    }
    slice.devices.push_back(d.published);
  }
  pool.slices.push_back(std::move(slice));
  kubeletplugin::DriverResources resources;
  resources.pools[node_name] = std::move(pool);
  return resources;
}

}  // namespace dra::gpu
