#include "lib/gpuplugin/inventory/dynamic_mig_devices.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/migprofiles/mig_placement.h"
#include "lib/gpuplugin/migprofiles/mig_profile.h"
#include "lib/k8s/quantity.h"
#include "lib/nvml/errors.h"

namespace dra::gpu {
namespace {

// The seven capacities: published name and counter name.
struct CapacityName {
  const char* capacity;
  const char* counter;
};
constexpr std::array<CapacityName, 7> kCapacities = {{{"multiprocessors", "multiprocessors"},
                                                      {"copyEngines", "copy-engines"},
                                                      {"decoders", "decoders"},
                                                      {"encoders", "encoders"},
                                                      {"jpegEngines", "jpeg-engines"},
                                                      {"ofaEngines", "ofa-engines"},
                                                      {"memory", "memory"}}};

std::array<int64_t, 7> Values(const nvml::GpuInstanceProfile& p) {
  return {p.multiprocessor_count,
          p.copy_engine_count,
          p.decoder_count,
          p.encoder_count,
          p.jpeg_count,
          p.ofa_count,
          static_cast<int64_t>(p.memory_size_mb << 20)};
}

k8s::Quantity Value(size_t i, int64_t v) {
  return kCapacities[i].capacity == std::string_view("memory") ? k8s::Quantity::FromBytes(v)
                                                               : k8s::Quantity::FromInt64(v);
}

// One profile with its placements, as announced.
struct ProfilePlacements {
  nvml::GpuInstanceProfile info;
  std::string name;  // "1g.5gb"
  std::vector<nvml::Placement> placements;
};

}  // namespace

std::string CounterSetName(unsigned int minor) {
  return absl::StrCat("gpu-", minor, "-counter-set");
}

bool MigToggleWithoutReset(const nvml::Device& device) {
  absl::StatusOr<nvml::Architecture> arch = device.Architecture();
  return arch.ok() && *arch != nvml::Architecture::kUnknown &&
         static_cast<uint32_t>(*arch) >= static_cast<uint32_t>(nvml::Architecture::kHopper);
}

absl::StatusOr<bool> IsDynamicMigCapable(const nvml::Device& device, const GpuInfo& info) {
  if (!info.mig_capable) return false;
  absl::StatusOr<nvml::VirtualizationMode> mode = device.VirtualizationMode();
  if (!mode.ok() && !nvml::IsNvmlError(mode.status(), nvml::ReturnCode::kNotSupported)) {
    return Annotate(mode.status(), absl::StrCat("GPU ", info.uuid, ": virtualization mode"));
  }
  if (mode.ok() && *mode == nvml::VirtualizationMode::kVgpu) return false;
  if (MigToggleWithoutReset(device)) return true;
  return info.mig_enabled;  // Ampere: only when MIG is on already (turning it on needs a reset)
}

absl::StatusOr<DynamicMigDevices> MakeDynamicMigDevices(
    const nvml::Device& device, const AllocatableDevice& full_gpu,
    const std::map<std::string, k8s::DeviceAttribute>& common) {
  const GpuInfo& gpu = full_gpu.gpu;
  const std::string where = absl::StrCat("GPU ", gpu.uuid);
  DynamicMigDevices out;
  absl::StatusOr<std::vector<nvml::GpuInstanceProfile>> profiles = device.GpuInstanceProfiles();
  if (!profiles.ok()) {
    return Annotate(profiles.status(), absl::StrCat(where, ": list GPU instance profiles"));
  }
  std::vector<ProfilePlacements> announced;
  std::array<int64_t, 7> max{};
  uint32_t memory_slices = 0;
  for (const nvml::GpuInstanceProfile& p : *profiles) {
    if (!gpu.memory_bytes) break;  // no profile names without the GPU's memory size
    absl::StatusOr<MigProfile> profile =
        MakeMigProfile(p.index, p.slice_count, p.memory_size_mb, *gpu.memory_bytes);
    if (!profile.ok()) {
      DRA_WARNING("GPU instance profile not announced", "uuid", gpu.uuid, "profileId", p.id, "err",
                  profile.status());
      continue;
    }
    absl::StatusOr<std::vector<nvml::Placement>> placements =
        device.GpuInstancePossiblePlacements(p.id);
    if (!placements.ok()) {
      if (nvml::IsNvmlError(placements.status(), nvml::ReturnCode::kNotSupported) ||
          nvml::IsNvmlError(placements.status(), nvml::ReturnCode::kInvalidArgument)) {
        continue;
      }
      return Annotate(placements.status(), absl::StrCat(where, ": placements of profile ", p.id));
    }
    if (placements->empty()) continue;
    const std::array<int64_t, 7> v = Values(p);
    for (size_t i = 0; i < v.size(); ++i) max[i] = std::max(max[i], v[i]);
    for (const nvml::Placement& pl : *placements) {
      memory_slices = std::max(memory_slices, pl.start + pl.size);
    }
    announced.push_back({p, profile->String(), *std::move(placements)});
  }
  // Announcement order (mig_placement.h): profiles by name, each one's placements orphan slices
  // first.
  std::vector<nvml::Placement> every_placement;
  for (const ProfilePlacements& pp : announced) {
    every_placement.insert(every_placement.end(), pp.placements.begin(), pp.placements.end());
  }
  const std::vector<bool> orphan = OrphanSlices(every_placement, memory_slices);
  for (ProfilePlacements& pp : announced) {
    pp.placements = PreferredPlacementOrder(std::move(pp.placements), orphan);
  }
  std::stable_sort(announced.begin(), announced.end(),
                   [](const ProfilePlacements& a, const ProfilePlacements& b) {
                     return a.name != b.name ? a.name < b.name : a.info.id < b.info.id;
                   });

  const std::string set_name = CounterSetName(gpu.minor);
  k8s::DeviceCounterConsumption all{set_name, {}, {}};
  if (!announced.empty()) {
    k8s::CounterSet set{set_name, {}, {}};
    for (size_t i = 0; i < kCapacities.size(); ++i) {
      set.counters[kCapacities[i].counter].value = Value(i, max[i]);
    }
    for (uint32_t s = 0; s < memory_slices; ++s) {
      set.counters[absl::StrCat("memory-slice-", s)].value = k8s::Quantity::FromInt64(1);
    }
    all.counters = set.counters;
    out.counter_set = std::move(set);
  }

  if (!gpu.mig_enabled || MigToggleWithoutReset(device)) {
    AllocatableDevice full = full_gpu;
    if (out.counter_set) {
      for (size_t i = 0; i < kCapacities.size(); ++i) {
        full.published.capacity[kCapacities[i].capacity].value = Value(i, max[i]);
      }
      full.published.consumes_counters = {all};
    }
    out.devices.push_back(std::move(full));
  }
  for (const ProfilePlacements& pp : announced) {
    const std::array<int64_t, 7> v = Values(pp.info);
    for (const nvml::Placement& pl : pp.placements) {
      AllocatableDevice d;
      d.announce_order = static_cast<unsigned int>(out.devices.size()) + 1;
      d.type = DeviceType::kMig;
      d.gpu = gpu;
      MigInfo& mig = d.mig.emplace();
      mig.dynamic = true;
      mig.parent_uuid = gpu.uuid;
      mig.parent_minor = gpu.minor;
      mig.parent_pci_bus_id = gpu.pci_bus_id;
      mig.profile = pp.name;
      mig.gi_profile_id = pp.info.id;
      mig.placement_start = pl.start;
      mig.placement_size = pl.size;
      d.name = MigDeviceName(gpu.minor, pp.name, pp.info.id, pl.start);
      k8s::Device& p = d.published;
      p.name = d.name;
      p.attributes = common;
      p.attributes["type"] = k8s::DeviceAttribute::String("mig");
      p.attributes["parentUUID"] = k8s::DeviceAttribute::String(gpu.uuid);
      p.attributes["profile"] = k8s::DeviceAttribute::String(pp.name);
      k8s::DeviceCounterConsumption use{set_name, {}, {}};
      for (size_t i = 0; i < kCapacities.size(); ++i) {
        p.capacity[kCapacities[i].capacity].value = Value(i, v[i]);
        use.counters[kCapacities[i].counter].value = Value(i, v[i]);
      }
      for (uint32_t s = pl.start; s < pl.start + pl.size; ++s) {
        use.counters[absl::StrCat("memory-slice-", s)].value = k8s::Quantity::FromInt64(1);
      }
      p.consumes_counters = {std::move(use)};
      out.devices.push_back(std::move(d));
    }
  }
  return out;
}

bool DynamicMigOrder(const AllocatableDevice& a, const AllocatableDevice& b) {
  if (a.gpu.pci_bus_id != b.gpu.pci_bus_id) return a.gpu.pci_bus_id < b.gpu.pci_bus_id;
  if (a.announce_order != b.announce_order) return a.announce_order < b.announce_order;
  return a.name < b.name;
}

}  // namespace dra::gpu
