#pragma once

// The node's allocatable devices, discovered once at startup from NVML and sysfs
// (docs/compatibility.md "Devices"): full GPUs, and the static MIG devices of GPUs with MIG enabled
// (the parent GPU is then not announced). Each device carries everything prepare needs later
// (UUIDs, minors, MIG instance ids) plus the ResourceSlice form it is published as.
//
// Published attributes (bare keys are in the driver's domain gpu.nvidia.com):
//   full GPU: type="gpu", uuid, productName, brand, architecture (strings);
//             cudaComputeCapability, driverVersion, cudaDriverVersion (semver versions);
//             resource.kubernetes.io/pciBusID, resource.kubernetes.io/pcieRoot (strings);
//             resource.kubernetes.io/numaNode (int, or a one-element int list with
//             list_type_attributes); addressingMode (string)
//             capacity: memory (total bytes)
//   MIG:      type="mig", uuid (the MIG UUID), parentUUID, profile ("1g.5gb"), and the parent's
//             attributes above except its uuid;
//             capacity: multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines,
//             memory (the GPU instance profile's MiB), memorySlice<i>=1 for each memory slice of
//             the instance's placement
// Optional ones are left out when their source is unavailable: pcieRoot (sysfs link unreadable,
// warning), numaNode (no numa_node file or a negative node), addressingMode (NVML lacks it or the
// GPU does not support it), memory of a full GPU (NVML NOT_SUPPORTED, as on unified-memory parts
// such as GB10: warning, Inventory::left_out). Architecture and brand values this plugin has no
// name for are published as "Unknown" (warning).
//
// Hardware that cannot be used degrades the node instead of failing discovery: a GPU for which
// NVML answers GPU_IS_LOST (fallen off the bus) or RESET_REQUIRED at any step is left out with its
// MIG devices (warning, Inventory::left_out); the other GPUs are published as usual.
//
// Thread-safety: an Inventory is an immutable value once built. Discover may run on any thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/k8s/objects_resource.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {

enum class DeviceType { kGpu, kMig, kVfio };
const char* DeviceTypeName(DeviceType t);  // "gpu", "mig", "vfio"

struct GpuInfo {
  std::string uuid;  // "GPU-..."
  unsigned int minor = 0;
  unsigned int index = 0;
  std::string pci_bus_id;  // "0000:65:00.0" (lower case, 4-digit domain)
  std::string product_name;
  bool mig_capable = false;              // nvmlDeviceGetMigMode answered (not NOT_SUPPORTED)
  bool mig_enabled = false;              // current MIG mode is enabled
  std::optional<uint64_t> memory_bytes;  // total; unset when NVML does not report it
  std::string architecture;              // "Hopper"
  std::string brand;                     // "Nvidia"
  std::optional<std::string> pcie_root;  // "pci0000:64"
  std::optional<int> numa_node;
  // Gate FabricManagerPartitioning: nvmlDeviceGetModuleId (FM's physicalId of the GPU); unset
  // when not asked for or NVML cannot tell (a warning).
  std::optional<unsigned int> module_id;
};

struct MigInfo {
  std::string uuid;  // "MIG-..."
  std::string parent_uuid;
  unsigned int parent_minor = 0;
  std::string parent_pci_bus_id;
  std::string profile;  // "1g.5gb"
  unsigned int gi_profile_id = 0;
  unsigned int placement_start = 0;
  unsigned int placement_size = 0;
  unsigned int gi_id = 0;
  unsigned int ci_id = 0;
  // DynamicMIG (dynamic_mig_devices.h): an abstract (profile, placement) that prepare creates;
  // uuid, gi_id and ci_id are unset here.
  bool dynamic = false;

  friend bool operator==(const MigInfo&, const MigInfo&) = default;
};

struct AllocatableDevice {
  std::string
      name;  // canonical: "gpu-<minor>" or "gpu-<minor>-mig-<profile>-<giProfileId>-<start>"
  DeviceType type = DeviceType::kGpu;
  GpuInfo gpu;                 // for MIG: the parent GPU
  std::optional<MigInfo> mig;  // set for DeviceType::kMig
  k8s::Device published;       // name, attributes, capacity as they appear in the ResourceSlice
  // DynamicMIG: position in its GPU's announcement order (dynamic_mig_devices.h); 0 otherwise.
  unsigned int announce_order = 0;
};

struct DiscoveryOptions {
  std::string sysfs_root = "/sys";    // for pcieRoot and numaNode
  bool list_type_attributes = false;  // gate DRAListTypeAttributes: numaNode as a one-element list
  // Gate DynamicMIG: dynamic-MIG-capable GPUs are announced as partitionable devices with a
  // shared counter set each (dynamic_mig_devices.h) instead of the full GPU or static MIG devices.
  bool dynamic_mig = false;
  // Gate FabricManagerPartitioning: read each GPU's module ID (GpuInfo::module_id).
  bool module_ids = false;
};

struct Inventory {
  std::string driver_version;              // "580.126.20" as NVML reports it
  std::vector<AllocatableDevice> devices;  // sorted by name
  // DynamicMIG: one shared counter set per dynamic-MIG-capable GPU, in GPU index order.
  std::vector<k8s::CounterSet> counter_sets;
  // What discovery could not publish, one entry per GPU or capacity, naming it and NVML's reason:
  // "GPU at index 1 (GPU at index 1: read name: nvmlDeviceGetName: gpu is lost)",
  // "capacity memory of GPU GPU-... (nvmlDeviceGetMemoryInfo_v2: not supported)". For the plugin's
  // Node event; each entry was also logged as a warning.
  std::vector<std::string> left_out;

  // The device named `name`, or null. The pointer lives as long as this Inventory, unmodified.
  const AllocatableDevice* Find(const std::string& name) const;
};

// Enumerates devices through an open NVML session. GPUs named "DGX Display" or "NVIDIA DGX
// Display" are skipped. Fails (naming the GPU and the step) on any NVML error other than the
// tolerated NOT_SUPPORTED cases and unusable GPUs above, on a PCI bus id that does not normalize,
// on an unparsable driver version, on an unknown MIG profile, and when a device would break a
// ResourceSlice limit (CheckDeviceLimits): publishing it would make the API server reject the whole
// slice, so it is a startup error rather than a silent omission.
absl::StatusOr<Inventory> Discover(const nvml::Session& session, const DiscoveryOptions& options);

// The canonical MIG device name; `profile` like "1g.5gb" or "1g.10gb+me" (dots removed, then
// RFC 1123 sanitized: "1g.10gb+me" -> "1g10gb-me"). `gi_profile_id` is the NVML profile id (19 for
// A100 1g.5gb), not the profile index.
std::string MigDeviceName(unsigned int parent_minor, const std::string& profile,
                          unsigned int gi_profile_id, unsigned int placement_start);

// ---- Helpers, exposed for tests and for other discovery code (VFIO) ----
// (NormalizePciBusId, ReadPcieRoot and ReadNumaNode are in sysfs.h.)

// A version string as a semver 2.0.0 value, leniently parsed like Masterminds/semver's
// NewVersion: optional "v", one to three numeric fields (missing ones are 0, leading zeros
// dropped), optional "-prerelease" and "+metadata". "580.126.20" -> "580.126.20",
// "8.0" -> "8.0.0", "535.104.05" -> "535.104.5". InvalidArgument otherwise.
absl::StatusOr<std::string> NormalizeSemver(std::string_view version);

// NVML's CUDA driver version number as semver: 13000 -> "13.0.0", 12040 -> "12.4.0".
std::string CudaDriverVersionString(int version);

// ResourceSlice limits per device (docs/api-facts.md "ResourceSlice limits").
inline constexpr size_t kMaxAttributesAndCapacities = 32;
inline constexpr size_t kMaxAttributeValues = 48;  // scalars, list elements and capacities
inline constexpr size_t kMaxAttributeValueLength = 64;
inline constexpr size_t kMaxDeviceNameLength = 63;

// OK when `device` is within the limits above; InvalidArgument naming the device and the limit.
absl::Status CheckDeviceLimits(const k8s::Device& device);

}  // namespace dra::gpu
