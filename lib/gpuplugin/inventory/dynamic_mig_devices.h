#pragma once

// DynamicMIG discovery (docs/dynamic-mig.md "Devices and counters"): a MIG-capable GPU is
// announced as partitionable devices. Per GPU one shared counter set `gpu-<minor>-counter-set`
// holds the per-key maximum, over its GPU instance profiles, of multiprocessors, copy-engines,
// decoders, encoders, jpeg-engines, ofa-engines and memory (bytes), plus memory-slice-<i> = 1 for
// each memory slice. The full GPU (announced while MIG is off, or always on GPUs that switch MIG
// without a reset, Hopper and newer) consumes all of it; every (profile, placement) is a device
// `gpu-<minor>-mig-<profile>-<giProfileId>-<start>` that consumes its profile's values and the
// memory slices of its placement. The MIG device does not exist yet: prepare creates it
// (MigInfo::dynamic, no uuid). Devices are listed in the announcement order of
// mig_placement.h (DynamicMigOrder).
//
// Thread-safety: pure functions over an open NVML session.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/k8s/objects_resource.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {

// "gpu-<minor>-counter-set".
std::string CounterSetName(unsigned int minor);

// Whether `device` is handled by DynamicMIG: MIG capable, not a vGPU guest, and either Hopper or
// newer or (Ampere) with MIG already enabled. Errors: the virtualization mode query failed.
absl::StatusOr<bool> IsDynamicMigCapable(const nvml::Device& device, const GpuInfo& info);

// Whether MIG mode can be switched without a GPU reset (Hopper and newer).
bool MigToggleWithoutReset(const nvml::Device& device);

struct DynamicMigDevices {
  std::vector<AllocatableDevice> devices;      // the full GPU (if announced) first, then MIG specs
  std::optional<k8s::CounterSet> counter_set;  // unset when the GPU lists no usable profile
};

// The devices of one dynamic-MIG-capable GPU. `full_gpu` is its full-GPU device as discovery
// made it; `common` the attributes its MIG devices share with it (parent's, without type/uuid).
absl::StatusOr<DynamicMigDevices> MakeDynamicMigDevices(
    const nvml::Device& device, const AllocatableDevice& full_gpu,
    const std::map<std::string, k8s::DeviceAttribute>& common);

// Announcement order: by PCI bus id, then AllocatableDevice::announce_order (the full GPU first,
// then the profiles by name, each one's placements as PreferredPlacementOrder has them), then by
// name. True when `a` goes before `b`.
bool DynamicMigOrder(const AllocatableDevice& a, const AllocatableDevice& b);

}  // namespace dra::gpu
