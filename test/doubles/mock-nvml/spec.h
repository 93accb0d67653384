#pragma once

// The static description of a mock node, read from the profile file
// (<root>/var/lib/mock-nvml/profile.json; format in README.md). Everything here is immutable for
// the life of an NVML session; what changes at run time (MIG instances, modes) is in state.h.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mock_nvml {

// A compute instance profile inside a GPU instance profile.
struct CiProfile {
  unsigned int index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_* (also its id, as in real drivers)
  unsigned int slices = 0;
  unsigned int multiprocessors = 0;
  unsigned int instance_count = 0;
};

// A GPU instance profile (one row of `nvidia-smi mig -lgip`).
struct GiProfile {
  unsigned int index = 0;   // NVML_GPU_INSTANCE_PROFILE_*
  unsigned int id = 0;      // the profile id NVML reports, e.g. 19 for 1g.5gb
  std::string name;         // "1g.5gb"
  unsigned int slices = 0;  // compute slices
  unsigned int instance_count = 0;
  unsigned int multiprocessors = 0;
  unsigned int copy_engines = 0;
  unsigned int decoders = 0;
  unsigned int encoders = 0;
  unsigned int jpegs = 0;
  unsigned int ofas = 0;
  unsigned long long memory_mib = 0;
  bool p2p = false;
  unsigned int placement_size = 0;             // memory slices per instance
  std::vector<unsigned int> placement_starts;  // every possible start
  std::vector<CiProfile> compute_profiles;     // in index order; the last one is the full CI
};

struct MigTable {
  unsigned int memory_slices = 8;
  unsigned int compute_slices = 7;
  std::vector<GiProfile> profiles;  // in index order
};

// A GPU instance present when the state is first created (the profile's "instances").
struct InitialInstance {
  unsigned int profile_index = 0;
  unsigned int placement_start = 0;
};

struct FabricSpec {
  std::array<unsigned char, 16> cluster_uuid{};
  unsigned int clique_id = 0;
  unsigned char state = 0;  // NVML_GPU_FABRIC_STATE_*
  int status = 0;           // nvmlReturn_t
  unsigned int health_mask = 0;
};

struct GpuSpec {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-..."
  unsigned int minor = 0;
  unsigned int pci_domain = 0;
  unsigned int pci_bus = 0;
  unsigned int pci_device = 0;
  unsigned int pci_device_id = 0;          // device << 16 | 0x10de
  unsigned int pci_subsystem_id = 0;       // subsystem device << 16 | subsystem vendor
  unsigned long long memory_total = 0;     // bytes
  unsigned long long memory_reserved = 0;  // bytes
  unsigned long long memory_used = 0;      // bytes, includes reserved
  unsigned int architecture = 0;           // NVML_DEVICE_ARCH_*, or any raw value of the profile
  int brand = 0;                           // NVML_BRAND_*, or any raw value of the profile
  int cc_major = 0;
  int cc_minor = 0;
  int virtualization_mode = 0;
  std::optional<unsigned int> addressing_mode;  // absent: NOT_SUPPORTED
  std::optional<unsigned int> module_id;        // absent: NOT_SUPPORTED
  std::optional<FabricSpec> fabric;             // absent: NOT_SUPPORTED
  // MIG. mig_table empty: the GPU is not MIG capable (every MIG call says NOT_SUPPORTED).
  std::optional<MigTable> mig_table;
  bool mig_toggle_requires_reset = false;  // Ampere: a mode change stays pending
  bool initial_mig_enabled = false;
  std::vector<InitialInstance> initial_instances;
  bool initial_persistence = true;
  int initial_compute_mode = 0;
  // Failures of this GPU only (the profile's per-GPU "forced_errors"): NVML function name ->
  // return code of every call of that function on this GPU's handles (and its MIG devices').
  std::map<std::string, int> forced_errors;
  // The GPU fell off the bus ("lost": true): its handle is still returned by index and by PCI bus
  // id, but every call on it (and the UUID lookup of it) answers NVML_ERROR_GPU_IS_LOST, unless
  // `forced_errors` names the function.
  bool lost = false;
};

struct NodeSpec {
  std::string driver_version;                // "580.126.20"
  int cuda_driver_version = 0;               // 13000 means 13.0
  std::string nvml_version;                  // "13.580.126.20"
  std::vector<GpuSpec> gpus;                 // in NVML index order
  std::map<std::string, int> forced_errors;  // NVML function name -> return code
};

// Parses a profile. On error returns false and sets `error` to a message naming the field.
bool ParseNodeSpec(const std::string& json_text, NodeSpec* spec, std::string* error);

// Reads and parses `path`.
bool LoadNodeSpec(const std::string& path, NodeSpec* spec, std::string* error);

// The profile make-driver-root.sh appends to the library file itself, so that a container which
// gets only the driver's files (CDI mounts of libnvidia-ml.so.*) still knows its node: the JSON
// text, then the 32-byte footer "\nmock-nvml-profile <length, 12 digits>\n". The dynamic loader
// maps the ELF segments only and ignores trailing bytes. Returns false with `error` when
// `library_path` has no such footer or the profile does not parse.
inline constexpr char kEmbeddedProfileMagic[] = "\nmock-nvml-profile ";
inline constexpr size_t kEmbeddedProfileFooterSize = 32;
bool LoadEmbeddedNodeSpec(const std::string& library_path, NodeSpec* spec, std::string* error);

// Looks up a GPU instance profile by index (NVML_GPU_INSTANCE_PROFILE_*) or by profile id.
const GiProfile* FindGiProfileByIndex(const GpuSpec& gpu, unsigned int index);
const GiProfile* FindGiProfileById(const GpuSpec& gpu, unsigned int id);
const CiProfile* FindCiProfile(const GiProfile& gi, unsigned int index);

}  // namespace mock_nvml
