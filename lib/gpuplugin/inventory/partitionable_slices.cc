#include "lib/gpuplugin/inventory/partitionable_slices.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/gpuplugin/inventory/dynamic_mig_devices.h"
#include "lib/gpuplugin/inventory/slices.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

absl::StatusOr<SliceLayout> SliceLayoutForServer(std::string_view git_version_in) {
  // Debian's Abseil has its own absl::string_view.
  const absl::string_view git_version(git_version_in.data(), git_version_in.size());
  absl::string_view v = git_version;
  if (!v.empty() && v[0] == 'v') v.remove_prefix(1);
  const size_t end = v.find_first_of("-+");
  const bool prerelease = end != absl::string_view::npos && v[end] == '-';
  std::vector<absl::string_view> parts = absl::StrSplit(v.substr(0, end), '.');
  int major = 0;
  int minor = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("API server version \"", git_version,
                     "\": not a version (want v<major>.<minor>.<patch>, e.g. v1.36.3)"));
  }
  int patch = 0;
  if (parts.size() > 2) (void)absl::SimpleAtoi(parts[2], &patch);
  const bool older = major < 1 || (major == 1 && minor < 35) ||
                     (major == 1 && minor == 35 && patch == 0 && prerelease);
  return older ? SliceLayout::kCombined : SliceLayout::kSplit;
}

absl::StatusOr<SliceLayout> SliceLayoutFromVersionJson(std::string_view version_json) {
  const nlohmann::json j = nlohmann::json::parse(version_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("gitVersion") || !j["gitVersion"].is_string()) {
    return absl::InvalidArgumentError(
        "API server /version: field gitVersion missing or not a string");
  }
  return SliceLayoutForServer(j["gitVersion"].get<std::string>());
}

kubeletplugin::DriverResources BuildPartitionableResources(const Inventory& inventory,
                                                           const std::string& node_name,
                                                           const api::ConsumableShares& shares,
                                                           SliceLayout layout) {
  // Per physical GPU (by PCI bus id): its devices in announcement order.
  std::map<std::string, std::vector<const AllocatableDevice*>> by_gpu;
  for (const AllocatableDevice& d : inventory.devices) by_gpu[d.gpu.pci_bus_id].push_back(&d);
  std::map<std::string, const k8s::CounterSet*> sets;  // by name
  for (const k8s::CounterSet& set : inventory.counter_sets) sets[set.name] = &set;

  kubeletplugin::Pool pool;
  if (layout == SliceLayout::kSplit && !inventory.counter_sets.empty()) {
    kubeletplugin::SliceContent counters;
    for (const auto& [name, set] : sets) counters.shared_counters.push_back(*set);
    pool.slices.push_back(std::move(counters));
  }
  for (auto& [bus_id, devices] : by_gpu) {
    std::stable_sort(devices.begin(), devices.end(),
                     [](const AllocatableDevice* a, const AllocatableDevice* b) {
                       return DynamicMigOrder(*a, *b);
                     });
    kubeletplugin::SliceContent slice;
    if (layout == SliceLayout::kCombined) {
      // The set its devices consume (by name: a VFIO device has no GPU minor of its own).
      std::set<std::string> consumed;
      for (const AllocatableDevice* d : devices) {
        for (const k8s::DeviceCounterConsumption& c : d->published.consumes_counters) {
          consumed.insert(c.counter_set);
        }
      }
      for (const std::string& name : consumed) {
        if (auto it = sets.find(name); it != sets.end()) {
          slice.shared_counters.push_back(*it->second);
        }
      }
    }
    for (const AllocatableDevice* d : devices) {
      if (slice.devices.size() == kMaxDevicesPerSlice) {
        pool.slices.push_back(std::move(slice));
        slice = {};
      }
      slice.devices.push_back(WithConsumableShares(*d, shares));
    }
    pool.slices.push_back(std::move(slice));
  }
  if (pool.slices.empty()) pool.slices.emplace_back();
  kubeletplugin::DriverResources resources;
  resources.pools[node_name] = std::move(pool);
  return resources;
}

}  // namespace dra::gpu
