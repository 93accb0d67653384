#include "lib/gpuplugin/inventory/slices.h"

namespace dra::gpu {
namespace {

constexpr int64_t kMi = int64_t{1} << 20;

nlohmann::json Range(const k8s::Quantity& min, const k8s::Quantity& max,
                     const k8s::Quantity& step) {
  return {{"min", min.ToString()}, {"max", max.ToString()}, {"step", step.ToString()}};
}

}  // namespace

k8s::Device WithConsumableShares(const AllocatableDevice& device,
                                 const api::ConsumableShares& shares) {
  k8s::Device out = device.published;
  if (!shares.Enabled() || device.type == DeviceType::kVfio) return out;
  using Mode = api::ConsumableShares::Mode;
  out.allow_multiple_allocations = true;
  if (auto it = out.capacity.find("memory"); it != out.capacity.end()) {
    const int64_t bytes = it->second.value.Value() / kMi * kMi;
    const k8s::Quantity memory = k8s::Quantity::FromBytes(bytes);
    const k8s::Quantity one_mi = k8s::Quantity::FromBytes(kMi);
    const k8s::Quantity zero = k8s::Quantity::FromBytes(0);
    it->second.value = memory;
    if (shares.mode == Mode::kMemory) {
      it->second.request_policy = {{"default", memory.ToString()},
                                   {"validRange", Range(one_mi, memory, one_mi)}};
    } else {
      it->second.request_policy = {{"default", zero.ToString()},
                                   {"validRange", Range(zero, memory, one_mi)}};
    }
  }
  if (shares.mode == Mode::kShares) {
    const k8s::Quantity one = k8s::Quantity::FromInt64(1);
    k8s::DeviceCapacity& c = out.capacity["shares"];
    c.value = k8s::Quantity::FromInt64(shares.shares);
    c.request_policy = {{"default", one.ToString()}, {"validRange", Range(one, c.value, one)}};
  }
  return out;
}

kubeletplugin::DriverResources BuildDriverResources(const Inventory& inventory,
                                                    const std::string& node_name,
                                                    const api::ConsumableShares& shares) {
  kubeletplugin::Pool pool;
  kubeletplugin::SliceContent slice;
  for (const AllocatableDevice& d : inventory.devices) {
    if (slice.devices.size() == kMaxDevicesPerSlice) {
      pool.slices.push_back(std::move(slice));
      slice = {};
    }
    slice.devices.push_back(WithConsumableShares(d, shares));
  }
  pool.slices.push_back(std::move(slice));
  kubeletplugin::DriverResources resources;
  resources.pools[node_name] = std::move(pool);
  return resources;
}

}  // namespace dra::gpu
