#include "lib/gpuplugin/inventory/inventory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/inventory/dynamic_mig_devices.h"
#include "lib/gpuplugin/inventory/sysfs.h"
#include "lib/gpuplugin/migprofiles/mig_profile.h"
#include "lib/k8s/quantity.h"
#include "lib/nvml/errors.h"
#include "lib/nvml/types.h"

namespace dra::gpu {
namespace {

constexpr char kPciBusIdKey[] = "resource.kubernetes.io/pciBusID";
constexpr char kPcieRootKey[] = "resource.kubernetes.io/pcieRoot";
constexpr char kNumaNodeKey[] = "resource.kubernetes.io/numaNode";

using Attributes = std::map<std::string, k8s::DeviceAttribute>;

struct SystemVersions {
  std::string driver;       // semver
  std::string cuda_driver;  // semver
};

// One physical GPU as read from NVML and sysfs: its identity, and the attributes that both its
// full-GPU device and its MIG devices publish (everything but type, uuid and MIG specifics).
struct GpuDetails {
  nvml::Device device;
  GpuInfo info;
  Attributes common;
  std::vector<std::string> left_out;  // for Inventory::left_out
};

bool IsDisplayDevice(const std::string& name) {
  return name == "DGX Display" || name == "NVIDIA DGX Display";
}

// Debian's Abseil has its own absl::string_view; StrCat and friends take only that one.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Reads the GPU at NVML enumeration position `position`. Errors name the GPU by its UUID once
// known ("GPU GPU-...: read brand: ..."), by its position before.
absl::StatusOr<GpuDetails> ReadGpu(const nvml::Device& device, size_t position,
                                   std::string product_name, const SystemVersions& versions,
                                   const DiscoveryOptions& options) {
  GpuDetails gpu{device, {}, {}, {}};
  GpuInfo& info = gpu.info;
  info.product_name = std::move(product_name);
  absl::StatusOr<std::string> uuid = device.Uuid();
  if (!uuid.ok()) {
    return Annotate(uuid.status(), absl::StrCat("GPU at index ", position, ": read UUID"));
  }
  info.uuid = *std::move(uuid);
  const std::string where = absl::StrCat("GPU ", info.uuid);
  auto annotated = [&where](const absl::Status& status, absl::string_view what) {
    return Annotate(status, absl::StrCat(where, ": ", what));
  };

  // Copies a required value into `out`, or fails naming the step.
  auto read = [&annotated](auto value, auto& out, absl::string_view what) -> absl::Status {
    if (!value.ok()) return annotated(value.status(), what);
    out = *std::move(value);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(read(device.Index(), info.index, "read index"));
  RETURN_IF_ERROR(read(device.MinorNumber(), info.minor, "read minor number"));
  nvml::PciInfo pci;
  RETURN_IF_ERROR(read(device.Pci(), pci, "read PCI info"));
  RETURN_IF_ERROR(read(NormalizePciBusId(pci.bus_id), info.pci_bus_id, "PCI bus id"));

  absl::StatusOr<nvml::MemoryInfo> memory = device.Memory();
  if (memory.ok()) {
    info.memory_bytes = memory->total;
  } else if (nvml::IsNotSupported(memory.status())) {
    // Unified-memory parts (GB10 and the like) have no memory of their own to report. The GPU is
    // published without the capacity, as the Go driver does.
    DRA_WARNING("GPU memory size not reported; publishing no memory capacity", "uuid", info.uuid,
                "err", memory.status());
    gpu.left_out.push_back(
        absl::StrCat("capacity memory of ", where, " (", memory.status().message(), ")"));
  } else {
    return annotated(memory.status(), "read memory info");
  }

  absl::StatusOr<nvml::MigModeInfo> mig = device.MigMode();
  if (mig.ok()) {
    info.mig_capable = true;
    info.mig_enabled = mig->current_enabled;
  } else if (!nvml::IsNotSupported(mig.status())) {
    return annotated(mig.status(), "read MIG mode");
  }

  nvml::Architecture arch = nvml::Architecture::kUnknown;
  RETURN_IF_ERROR(read(device.Architecture(), arch, "read architecture"));
  info.architecture = std::string(nvml::ArchitectureName(arch));
  nvml::Brand brand = nvml::Brand::kUnknown;
  RETURN_IF_ERROR(read(device.Brand(), brand, "read brand"));
  info.brand = std::string(nvml::BrandName(brand));
  // A GPU newer than this plugin reports values it has no name for: it is still a GPU, published
  // with the neutral "Unknown" (what the Go driver's go-nvlib strings say for such values).
  if (arch != nvml::Architecture::kUnknown && info.architecture == "Unknown") {
    DRA_WARNING("GPU architecture unknown to this plugin; publishing architecture=Unknown", "uuid",
                info.uuid, "value", static_cast<uint32_t>(arch));
  }
  if (brand != nvml::Brand::kUnknown && info.brand == "Unknown") {
    DRA_WARNING("GPU brand unknown to this plugin; publishing brand=Unknown", "uuid", info.uuid,
                "value", static_cast<int>(brand));
  }
  nvml::ComputeCapability cc;
  RETURN_IF_ERROR(read(device.CudaComputeCapability(), cc, "read CUDA compute capability"));
  std::string cc_version;
  RETURN_IF_ERROR(read(NormalizeSemver(absl::StrCat(cc.major, ".", cc.minor)), cc_version,
                       "CUDA compute capability"));

  std::optional<std::string> addressing;
  absl::StatusOr<nvml::AddressingMode> mode = device.AddressingMode();
  if (mode.ok()) {
    addressing = std::string(nvml::AddressingModeName(*mode));
  } else if (!nvml::IsNotSupported(mode.status())) {
    return annotated(mode.status(), "read addressing mode");
  }

  if (options.module_ids) {  // failure tolerated, as in the Go driver
    absl::StatusOr<unsigned int> module = device.ModuleId();
    if (module.ok()) {
      info.module_id = *module;
    } else {
      DRA_WARNING("GPU module ID unknown; the GPU matches no Fabric Manager partition", "uuid",
                  info.uuid, "err", module.status());
    }
  }
  absl::StatusOr<std::string> root = ReadPcieRoot(options.sysfs_root, info.pci_bus_id);
  if (root.ok()) {
    info.pcie_root = *std::move(root);
  } else {
    DRA_WARNING("PCIe root unknown; publishing no pcieRoot attribute", "uuid", info.uuid, "err",
                root.status());
  }
  absl::StatusOr<std::optional<int>> numa = ReadNumaNode(options.sysfs_root, info.pci_bus_id);
  if (numa.ok()) {
    info.numa_node = *numa;
  } else {
    DRA_WARNING("NUMA node unknown; publishing no numaNode attribute", "uuid", info.uuid, "err",
                numa.status());
  }

  Attributes& a = gpu.common;
  a["productName"] = k8s::DeviceAttribute::String(info.product_name);
  a["brand"] = k8s::DeviceAttribute::String(info.brand);
  a["architecture"] = k8s::DeviceAttribute::String(info.architecture);
  a["cudaComputeCapability"] = k8s::DeviceAttribute::Version(std::move(cc_version));
  a["driverVersion"] = k8s::DeviceAttribute::Version(versions.driver);
  a["cudaDriverVersion"] = k8s::DeviceAttribute::Version(versions.cuda_driver);
  a[kPciBusIdKey] = k8s::DeviceAttribute::String(info.pci_bus_id);
  if (info.pcie_root) a[kPcieRootKey] = k8s::DeviceAttribute::String(*info.pcie_root);
  if (info.numa_node) {
    k8s::DeviceAttribute numa_attr;
    if (options.list_type_attributes) {
      numa_attr.int_values = {*info.numa_node};
    } else {
      numa_attr.int_value = *info.numa_node;
    }
    a[kNumaNodeKey] = std::move(numa_attr);
  }
  if (addressing) a["addressingMode"] = k8s::DeviceAttribute::String(*addressing);
  return gpu;
}

AllocatableDevice FullGpuDevice(const GpuDetails& gpu) {
  AllocatableDevice out;
  out.name = absl::StrCat("gpu-", gpu.info.minor);
  out.type = DeviceType::kGpu;
  out.gpu = gpu.info;
  out.published.name = out.name;
  out.published.attributes = gpu.common;
  out.published.attributes["type"] = k8s::DeviceAttribute::String("gpu");
  out.published.attributes["uuid"] = k8s::DeviceAttribute::String(gpu.info.uuid);
  if (gpu.info.memory_bytes) {
    out.published.capacity["memory"].value =
        k8s::Quantity::FromBytes(static_cast<int64_t>(*gpu.info.memory_bytes));
  }
  return out;
}

k8s::DeviceCapacity Count(uint64_t n) {
  k8s::DeviceCapacity c;
  c.value = k8s::Quantity::FromInt64(static_cast<int64_t>(n));
  return c;
}

// One static MIG device of `gpu`. `profiles` are the parent's GPU instance profiles.
absl::StatusOr<AllocatableDevice> StaticMigDevice(
    const GpuDetails& gpu, const std::vector<nvml::GpuInstanceProfile>& profiles,
    const nvml::MigDevice& mig) {
  MigInfo info;
  info.parent_uuid = gpu.info.uuid;
  info.parent_minor = gpu.info.minor;
  info.parent_pci_bus_id = gpu.info.pci_bus_id;
  ASSIGN_OR_RETURN(info.uuid, mig.Uuid());
  ASSIGN_OR_RETURN(info.gi_id, mig.GpuInstanceId());
  ASSIGN_OR_RETURN(info.ci_id, mig.ComputeInstanceId());
  ASSIGN_OR_RETURN(nvml::MigDeviceAttributes attributes, mig.Attributes());
  ASSIGN_OR_RETURN(nvml::GpuInstance gi, gpu.device.GpuInstanceById(info.gi_id));
  ASSIGN_OR_RETURN(nvml::GpuInstanceInfo gi_info, gi.Info());
  auto profile = std::find_if(profiles.begin(), profiles.end(),
                              [&](const auto& p) { return p.id == gi_info.profile_id; });
  if (profile == profiles.end()) {
    return absl::NotFoundError(absl::StrCat("GPU instance ", info.gi_id, " has profile id ",
                                            gi_info.profile_id, ", which the GPU does not list"));
  }
  if (!gpu.info.memory_bytes) {
    return absl::FailedPreconditionError(
        "the GPU's memory size, needed for the profile name, "
        "is unknown");
  }
  ASSIGN_OR_RETURN(MigProfile mig_profile,
                   MakeMigProfile(profile->index, attributes.compute_instance_slice_count,
                                  attributes.memory_size_mb, *gpu.info.memory_bytes));
  info.profile = mig_profile.String();
  info.gi_profile_id = profile->id;
  info.placement_start = gi_info.placement.start;
  info.placement_size = gi_info.placement.size;

  AllocatableDevice out;
  out.name =
      MigDeviceName(info.parent_minor, info.profile, info.gi_profile_id, info.placement_start);
  out.type = DeviceType::kMig;
  out.gpu = gpu.info;
  k8s::Device& d = out.published;
  d.name = out.name;
  d.attributes = gpu.common;
  d.attributes["type"] = k8s::DeviceAttribute::String("mig");
  d.attributes["uuid"] = k8s::DeviceAttribute::String(info.uuid);
  d.attributes["parentUUID"] = k8s::DeviceAttribute::String(info.parent_uuid);
  d.attributes["profile"] = k8s::DeviceAttribute::String(info.profile);
  d.capacity["multiprocessors"] = Count(profile->multiprocessor_count);
  d.capacity["copyEngines"] = Count(profile->copy_engine_count);
  d.capacity["decoders"] = Count(profile->decoder_count);
  d.capacity["encoders"] = Count(profile->encoder_count);
  d.capacity["jpegEngines"] = Count(profile->jpeg_count);
  d.capacity["ofaEngines"] = Count(profile->ofa_count);
  d.capacity["memory"].value =
      k8s::Quantity::FromBytes(static_cast<int64_t>(profile->memory_size_mb << 20));
  for (unsigned int i = info.placement_start; i < info.placement_start + info.placement_size; ++i) {
    d.capacity[absl::StrCat("memorySlice", i)] = Count(1);
  }
  out.mig = std::move(info);
  return out;
}

// The devices one GPU contributes: itself, or its static MIG devices when MIG is enabled.
absl::Status AddGpuDevices(const GpuDetails& gpu, std::vector<AllocatableDevice>& out) {
  if (!gpu.info.mig_enabled) {
    out.push_back(FullGpuDevice(gpu));
    return absl::OkStatus();
  }
  const std::string where = absl::StrCat("GPU ", gpu.info.uuid);
  absl::StatusOr<std::vector<nvml::MigDevice>> migs = gpu.device.MigDevices();
  if (!migs.ok()) return Annotate(migs.status(), absl::StrCat(where, ": list MIG devices"));
  if (migs->empty()) {
    DRA_WARNING(absl::StrCat("Physical GPU gpu-", gpu.info.minor,
                             " has MIG mode enabled but no configured MIG devices"),
                "uuid", gpu.info.uuid);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<nvml::GpuInstanceProfile>> profiles = gpu.device.GpuInstanceProfiles();
  if (!profiles.ok()) {
    return Annotate(profiles.status(), absl::StrCat(where, ": list GPU instance profiles"));
  }
  for (size_t i = 0; i < migs->size(); ++i) {
    absl::StatusOr<AllocatableDevice> device = StaticMigDevice(gpu, *profiles, (*migs)[i]);
    if (!device.ok()) {
      return Annotate(device.status(), absl::StrCat(where, ": MIG device ", i));
    }
    out.push_back(*std::move(device));
  }
  return absl::OkStatus();
}

// NVML's answers for a GPU that can no longer be used until the node is repaired or the GPU is
// reset. Any other failure stays fatal: it says something is wrong with the driver or the plugin.
bool IsUnusableGpu(const absl::Status& status) {
  return nvml::IsNvmlError(status, nvml::ReturnCode::kGpuIsLost) ||
         nvml::IsNvmlError(status, nvml::ReturnCode::kResetRequired);
}

// Reads the GPU at NVML index `index` and appends its devices (and what it leaves out) to
// `inventory`; appends nothing on error.
absl::Status AddGpuAt(const nvml::Session& session, unsigned int index,
                      const SystemVersions& versions, const DiscoveryOptions& options,
                      Inventory& inventory) {
  const std::string where = absl::StrCat("GPU at index ", index);
  absl::StatusOr<nvml::Device> device = session.DeviceByIndex(index);
  if (!device.ok()) return Annotate(device.status(), absl::StrCat(where, ": get handle"));
  absl::StatusOr<std::string> name = device->Name();
  if (!name.ok()) return Annotate(name.status(), absl::StrCat(where, ": read name"));
  if (IsDisplayDevice(*name)) return absl::OkStatus();
  ASSIGN_OR_RETURN(GpuDetails gpu, ReadGpu(*device, index, *std::move(name), versions, options));
  std::vector<AllocatableDevice> devices;
  bool dynamic_mig = false;
  if (options.dynamic_mig) {
    ASSIGN_OR_RETURN(dynamic_mig, IsDynamicMigCapable(*device, gpu.info));
  }
  if (dynamic_mig) {
    ASSIGN_OR_RETURN(DynamicMigDevices dynamic,
                     MakeDynamicMigDevices(*device, FullGpuDevice(gpu), gpu.common));
    devices = std::move(dynamic.devices);
    if (dynamic.counter_set) inventory.counter_sets.push_back(*std::move(dynamic.counter_set));
  } else {
    RETURN_IF_ERROR(AddGpuDevices(gpu, devices));
    // The public driver's announcement lines (docs/compatibility.md "Log lines").
    for (const AllocatableDevice& d : devices) {
      if (d.type == DeviceType::kMig) {
        DRA_INFO(absl::StrCat("Adding MIG device ", d.name, " to allocatable devices (parent: gpu-",
                              gpu.info.minor, ")"),
                 "uuid", d.mig->uuid);
      } else {
        DRA_INFO(absl::StrCat("Adding device ", d.name, " to allocatable devices"), "uuid",
                 gpu.info.uuid);
      }
    }
  }
  for (AllocatableDevice& d : devices) inventory.devices.push_back(std::move(d));
  for (std::string& s : gpu.left_out) inventory.left_out.push_back(std::move(s));
  return absl::OkStatus();
}

bool IsSemverIdentifier(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

bool IsNumeric(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Dot-separated identifiers of a prerelease or build suffix; a numeric prerelease identifier
// may not have a leading zero (semver 2.0.0 item 9).
bool ValidSuffix(std::string_view s, bool prerelease) {
  while (true) {
    const size_t dot = s.find('.');
    const std::string_view id = s.substr(0, dot);
    if (!IsSemverIdentifier(id)) return false;
    if (prerelease && IsNumeric(id) && id.size() > 1 && id[0] == '0') return false;
    if (dot == std::string_view::npos) return true;
    s.remove_prefix(dot + 1);
  }
}

}  // namespace

const char* DeviceTypeName(DeviceType t) {
  switch (t) {
    case DeviceType::kGpu:
      return "gpu";
    case DeviceType::kMig:
      return "mig";
    case DeviceType::kVfio:
      return "vfio";
  }
  return "unknown";
}

const AllocatableDevice* Inventory::Find(const std::string& name) const {
  auto it =
      std::lower_bound(devices.begin(), devices.end(), name,
                       [](const AllocatableDevice& d, const std::string& n) { return d.name < n; });
  return it != devices.end() && it->name == name ? &*it : nullptr;
}

std::string MigDeviceName(unsigned int parent_minor, const std::string& profile,
                          unsigned int gi_profile_id, unsigned int placement_start) {
  return absl::StrCat("gpu-", parent_minor, "-mig-", MigProfileNameComponent(profile), "-",
                      gi_profile_id, "-", placement_start);
}

absl::StatusOr<std::string> NormalizeSemver(std::string_view version) {
  auto invalid = [version]() {
    return absl::InvalidArgumentError(
        absl::StrCat("version \"", Absl(version), "\" is not a semantic version"));
  };
  std::string_view rest = version;
  if (!rest.empty() && rest[0] == 'v') rest.remove_prefix(1);
  std::string_view build;
  if (size_t plus = rest.find('+'); plus != std::string_view::npos) {
    build = rest.substr(plus + 1);
    rest = rest.substr(0, plus);
    if (!ValidSuffix(build, /*prerelease=*/false)) return invalid();
  }
  std::string_view prerelease;
  if (size_t dash = rest.find('-'); dash != std::string_view::npos) {
    prerelease = rest.substr(dash + 1);
    rest = rest.substr(0, dash);
    if (!ValidSuffix(prerelease, /*prerelease=*/true)) return invalid();
  }
  uint64_t numbers[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const size_t dot = rest.find('.');
    const std::string_view field = rest.substr(0, dot);
    if (!IsNumeric(field)) return invalid();
    for (char c : field) {
      if (numbers[i] > (UINT64_MAX - 9) / 10) return invalid();
      numbers[i] = numbers[i] * 10 + static_cast<uint64_t>(c - '0');
    }
    if (dot == std::string_view::npos) {
      rest = {};
      break;
    }
    rest.remove_prefix(dot + 1);
    if (i == 2) return invalid();  // a fourth field
  }
  std::string out = absl::StrCat(numbers[0], ".", numbers[1], ".", numbers[2]);
  if (!prerelease.empty()) absl::StrAppend(&out, "-", Absl(prerelease));
  if (!build.empty()) absl::StrAppend(&out, "+", Absl(build));
  return out;
}

std::string CudaDriverVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10, ".0");
}

absl::Status CheckDeviceLimits(const k8s::Device& device) {
  auto fail = [&device](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", device.name, ": ", what, " (ResourceSlice limit)"));
  };
  if (device.name.empty() || device.name.size() > kMaxDeviceNameLength) {
    return fail(absl::StrCat("name must have 1 to ", kMaxDeviceNameLength, " characters"));
  }
  const size_t entries = device.attributes.size() + device.capacity.size();
  if (entries > kMaxAttributesAndCapacities) {
    return fail(absl::StrCat(entries, " attributes and capacities, more than ",
                             kMaxAttributesAndCapacities));
  }
  size_t values = device.capacity.size();
  for (const auto& [key, attribute] : device.attributes) {
    values += attribute.int_values.size() + attribute.bool_values.size() +
              attribute.string_values.size() + attribute.version_values.size();
    if (attribute.int_value || attribute.bool_value || attribute.string_value ||
        attribute.version_value) {
      ++values;
    }
    for (const std::optional<std::string>* s :
         {&attribute.string_value, &attribute.version_value}) {
      if (*s && (*s)->size() > kMaxAttributeValueLength) {
        return fail(absl::StrCat("attribute ", key, " is longer than ", kMaxAttributeValueLength,
                                 " characters"));
      }
    }
  }
  if (values > kMaxAttributeValues) {
    return fail(
        absl::StrCat(values, " attribute values and capacities, more than ", kMaxAttributeValues));
  }
  return absl::OkStatus();
}

absl::StatusOr<Inventory> Discover(const nvml::Session& session, const DiscoveryOptions& options) {
  Inventory inventory;
  ASSIGN_OR_RETURN(inventory.driver_version, session.DriverVersion());
  SystemVersions versions;
  absl::StatusOr<std::string> driver = NormalizeSemver(inventory.driver_version);
  if (!driver.ok()) return Annotate(driver.status(), "driver version");
  versions.driver = *std::move(driver);
  ASSIGN_OR_RETURN(int cuda, session.CudaDriverVersion());
  versions.cuda_driver = CudaDriverVersionString(cuda);

  ASSIGN_OR_RETURN(unsigned int count, session.DeviceCount());
  DRA_INFO("Traverse GPU devices", "count", count);
  for (unsigned int i = 0; i < count; ++i) {
    absl::Status added = AddGpuAt(session, i, versions, options, inventory);
    if (added.ok()) continue;
    if (!IsUnusableGpu(added)) return added;
    // One GPU off the bus must not take the node's other GPUs with it: they stay published and
    // preparable, and the plugin says what it left out (log, Inventory::left_out -> Node event).
    DRA_WARNING("GPU unusable (lost or needing a reset); publishing the node without it", "index",
                i, "err", added);
    inventory.left_out.push_back(absl::StrCat("GPU at index ", i, " (", added.message(), ")"));
  }
  std::sort(inventory.devices.begin(), inventory.devices.end(),
            [](const AllocatableDevice& a, const AllocatableDevice& b) { return a.name < b.name; });
  for (size_t i = 0; i < inventory.devices.size(); ++i) {
    if (i > 0 && inventory.devices[i].name == inventory.devices[i - 1].name) {
      return absl::InternalError(absl::StrCat("two devices are named ", inventory.devices[i].name));
    }
    RETURN_IF_ERROR(CheckDeviceLimits(inventory.devices[i].published));
  }
  return inventory;
}

}  // namespace dra::gpu
