#pragma once

// Value types of the NVML facade (lib/nvml/nvml.h). Plain data in our own terms; no NVML type
// appears here. Enumerator values equal NVML's, which keeps conversions trivial and lets logs
// print the number NVML documents.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dra::nvml {

enum class Architecture : uint32_t {
  kKepler = 2,
  kMaxwell = 3,
  kPascal = 4,
  kVolta = 5,
  kTuring = 6,
  kAmpere = 7,
  kAda = 8,
  kHopper = 9,
  kBlackwell = 10,
  kRubin = 13,
  kUnknown = 0xffffffff,
};

// "Kepler" ... "Ada Lovelace", "Hopper", "Blackwell", "Rubin"; "Unknown" for anything else,
// including values newer NVML releases add (the strings of the `architecture` device attribute,
// docs/compatibility.md "Attributes and capacities").
std::string_view ArchitectureName(Architecture arch);

enum class Brand : int {
  kUnknown = 0,
  kQuadro = 1,
  kTesla = 2,
  kNvs = 3,
  kGrid = 4,
  kGeForce = 5,
  kTitan = 6,
  kNvidiaVApps = 7,
  kNvidiaVpc = 8,
  kNvidiaVcs = 9,
  kNvidiaVws = 10,
  kNvidiaCloudGaming = 11,
  kQuadroRtx = 12,
  kNvidiaRtx = 13,
  kNvidia = 14,
  kGeForceRtx = 15,
  kTitanRtx = 16,
};

// "Unknown", "Quadro", "Tesla", "NVS", "Grid", "GeForce", "Titan", "NvidiaVApps", "NvidiaVPC",
// "NvidiaVCS", "NvidiaVWS", "NvidiaCloudGaming", "QuadroRTX", "NvidiaRTX", "Nvidia",
// "GeForceRTX", "TitanRTX" (the `brand` device attribute strings, docs/compatibility.md
// "Attributes and capacities").
std::string_view BrandName(Brand brand);

enum class AddressingMode : uint32_t { kNone = 0, kHmm = 1, kAts = 2 };

// "None", "HMM", "ATS".
std::string_view AddressingModeName(AddressingMode mode);

enum class ComputeMode : int {
  kDefault = 0,
  kExclusiveThread = 1,
  kProhibited = 2,
  kExclusiveProcess = 3,
};

enum class VirtualizationMode : int {
  kNone = 0,
  kPassthrough = 1,
  kVgpu = 2,
  kHostVgpu = 3,
  kHostVsga = 4,
};

struct PciInfo {
  std::string bus_id;         // as NVML reports it: "00000000:18:00.0" (8-digit domain)
  std::string bus_id_legacy;  // "0000:18:00.0"
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t pci_device_id = 0;     // device id << 16 | vendor id
  uint32_t pci_subsystem_id = 0;  // subsystem device id << 16 | subsystem vendor id
};

// Bytes. `used` includes `reserved`; `reserved` is 0 when only the v1 query is available.
struct MemoryInfo {
  uint64_t total = 0;
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t free = 0;
};

struct ComputeCapability {
  int major = 0;
  int minor = 0;
};

struct MigModeInfo {
  bool current_enabled = false;
  bool pending_enabled = false;
};

// A range of memory slices (GPU instances) or compute slices (compute instances).
struct Placement {
  uint32_t start = 0;
  uint32_t size = 0;
  friend bool operator==(const Placement&, const Placement&) = default;
};

struct GpuInstanceProfile {
  uint32_t index = 0;  // NVML_GPU_INSTANCE_PROFILE_* that was queried
  uint32_t id = 0;     // the profile id, e.g. 19 for A100 1g.5gb
  bool p2p_supported = false;
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  uint32_t multiprocessor_count = 0;
  uint32_t copy_engine_count = 0;
  uint32_t decoder_count = 0;
  uint32_t encoder_count = 0;
  uint32_t jpeg_count = 0;
  uint32_t ofa_count = 0;
  uint64_t memory_size_mb = 0;  // MiB
  std::string name;             // "MIG 1g.5gb"; empty when the library lacks the V query
};

struct ComputeInstanceProfile {
  uint32_t index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_* that was queried
  uint32_t id = 0;
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  uint32_t multiprocessor_count = 0;
  uint32_t shared_copy_engine_count = 0;
  uint32_t shared_decoder_count = 0;
  uint32_t shared_encoder_count = 0;
  uint32_t shared_jpeg_count = 0;
  uint32_t shared_ofa_count = 0;
  std::string name;  // "MIG 1g.5gb", "MIG 1c.3g.20gb"; empty without the V query
};

struct GpuInstanceInfo {
  uint32_t id = 0;
  uint32_t profile_id = 0;
  Placement placement;  // memory slices
};

struct ComputeInstanceInfo {
  uint32_t id = 0;
  uint32_t profile_id = 0;
  Placement placement;  // compute slices within the GPU instance
};

// Engines and memory of one MIG device (nvmlDeviceGetAttributes_v2).
struct MigDeviceAttributes {
  uint32_t multiprocessor_count = 0;
  uint32_t shared_copy_engine_count = 0;
  uint32_t shared_decoder_count = 0;
  uint32_t shared_encoder_count = 0;
  uint32_t shared_jpeg_count = 0;
  uint32_t shared_ofa_count = 0;
  uint32_t gpu_instance_slice_count = 0;
  uint32_t compute_instance_slice_count = 0;
  uint64_t memory_size_mb = 0;
};

enum class FabricState : uint8_t {
  kNotSupported = 0,
  kNotStarted = 1,
  kInProgress = 2,
  kCompleted = 3,
};

// NVLink fabric membership (nvmlDeviceGetGpuFabricInfo[V]).
struct FabricInfo {
  std::array<uint8_t, 16> cluster_uuid{};
  int status = 0;  // an NVML return code: 0 when registration succeeded
  uint32_t clique_id = 0;
  FabricState state = FabricState::kNotSupported;
  uint32_t health_mask = 0;  // 0 when only the unversioned query is available

  bool ClusterUuidIsZero() const;
  // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case.
  std::string ClusterUuidString() const;
};

}  // namespace dra::nvml
