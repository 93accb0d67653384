// Device: identity, PCI, memory, architecture and per-GPU settings. MIG methods are in
// device_mig.cc.

#include <cstring>

#include "lib/common/status.h"
#include "lib/nvml/call.h"
#include "lib/nvml/nvml.h"

namespace dra::nvml {
namespace {

using internal::AsDevice;
using internal::Call;

PciInfo ToPciInfo(const abi::PciInfo& in) {
  PciInfo out;
  out.bus_id = std::string(in.bus_id, strnlen(in.bus_id, sizeof(in.bus_id)));
  out.bus_id_legacy =
      std::string(in.bus_id_legacy, strnlen(in.bus_id_legacy, sizeof(in.bus_id_legacy)));
  out.domain = in.domain;
  out.bus = in.bus;
  out.device = in.device;
  out.pci_device_id = in.pci_device_id;
  out.pci_subsystem_id = in.pci_subsystem_id;
  return out;
}

template <typename Info>
void CopyFabric(const Info& in, FabricInfo* out) {
  std::memcpy(out->cluster_uuid.data(), in.cluster_uuid, out->cluster_uuid.size());
  out->status = in.status;
  out->clique_id = in.clique_id;
  out->state = static_cast<FabricState>(in.state);
}

}  // namespace

// Shared by Device and MigDevice (mig.cc): name and UUID buffers, memory with v2 preferred.
namespace internal {

absl::StatusOr<std::string> GetDeviceString(const Library& library, abi::DeviceGetStringFn* fn,
                                            std::string_view function, void* handle) {
  char buffer[abi::kDeviceUuidV2BufferSize] = {};  // the largest of the name/UUID sizes
  RETURN_IF_ERROR(Call(library, fn, function, AsDevice(handle), buffer,
                       static_cast<unsigned int>(sizeof(buffer))));
  return std::string(buffer);
}

absl::StatusOr<MemoryInfo> GetDeviceMemory(const Library& library, void* handle) {
  const Api& api = library.api();
  MemoryInfo out;
  if (api.device_get_memory_info_v2 != nullptr) {
    abi::MemoryV2 m{};
    m.version = abi::kMemoryV2Version;
    RETURN_IF_ERROR(Call(library, api.device_get_memory_info_v2, "nvmlDeviceGetMemoryInfo_v2",
                         AsDevice(handle), &m));
    out = {m.total, m.reserved, m.used, m.free};
    return out;
  }
  abi::Memory m{};
  RETURN_IF_ERROR(
      Call(library, api.device_get_memory_info, "nvmlDeviceGetMemoryInfo", AsDevice(handle), &m));
  out = {m.total, 0, m.used, m.free};
  return out;
}

}  // namespace internal

absl::StatusOr<std::string> Device::Name() const {
  return internal::GetDeviceString(*library_, library_->api().device_get_name, "nvmlDeviceGetName",
                                   handle_);
}

absl::StatusOr<std::string> Device::Uuid() const {
  return internal::GetDeviceString(*library_, library_->api().device_get_uuid, "nvmlDeviceGetUUID",
                                   handle_);
}

absl::StatusOr<unsigned int> Device::MinorNumber() const {
  unsigned int minor = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_minor_number,
                       "nvmlDeviceGetMinorNumber", AsDevice(handle_), &minor));
  return minor;
}

absl::StatusOr<unsigned int> Device::Index() const {
  unsigned int index = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_index, "nvmlDeviceGetIndex",
                       AsDevice(handle_), &index));
  return index;
}

absl::StatusOr<PciInfo> Device::Pci() const {
  abi::PciInfo pci{};
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_pci_info, "nvmlDeviceGetPciInfo_v3",
                       AsDevice(handle_), &pci));
  return ToPciInfo(pci);
}

absl::StatusOr<MemoryInfo> Device::Memory() const {
  return internal::GetDeviceMemory(*library_, handle_);
}

absl::StatusOr<nvml::Architecture> Device::Architecture() const {
  unsigned int arch = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_architecture,
                       "nvmlDeviceGetArchitecture", AsDevice(handle_), &arch));
  return static_cast<nvml::Architecture>(arch);
}

absl::StatusOr<nvml::Brand> Device::Brand() const {
  int brand = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_brand, "nvmlDeviceGetBrand",
                       AsDevice(handle_), &brand));
  return static_cast<nvml::Brand>(brand);
}

absl::StatusOr<ComputeCapability> Device::CudaComputeCapability() const {
  ComputeCapability cc;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_cuda_compute_capability,
                       "nvmlDeviceGetCudaComputeCapability", AsDevice(handle_), &cc.major,
                       &cc.minor));
  return cc;
}

absl::StatusOr<nvml::AddressingMode> Device::AddressingMode() const {
  abi::DeviceAddressingMode mode{};
  mode.version = abi::kDeviceAddressingModeV1Version;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_addressing_mode,
                       "nvmlDeviceGetAddressingMode", AsDevice(handle_), &mode));
  return static_cast<nvml::AddressingMode>(mode.value);
}

absl::StatusOr<nvml::VirtualizationMode> Device::VirtualizationMode() const {
  int mode = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_virtualization_mode,
                       "nvmlDeviceGetVirtualizationMode", AsDevice(handle_), &mode));
  return static_cast<nvml::VirtualizationMode>(mode);
}

absl::StatusOr<unsigned int> Device::ModuleId() const {
  unsigned int id = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_module_id, "nvmlDeviceGetModuleId",
                       AsDevice(handle_), &id));
  return id;
}

absl::StatusOr<FabricInfo> Device::Fabric() const {
  const internal::Api& api = library_->api();
  FabricInfo out;
  if (api.device_get_gpu_fabric_info_v != nullptr) {
    abi::GpuFabricInfoV3 info{};
    info.version = abi::kGpuFabricInfoV3Version;
    RETURN_IF_ERROR(Call(*library_, api.device_get_gpu_fabric_info_v, "nvmlDeviceGetGpuFabricInfoV",
                         AsDevice(handle_), &info));
    CopyFabric(info, &out);
    out.health_mask = info.health_mask;
    return out;
  }
  abi::GpuFabricInfo info{};
  RETURN_IF_ERROR(Call(*library_, api.device_get_gpu_fabric_info, "nvmlDeviceGetGpuFabricInfo",
                       AsDevice(handle_), &info));
  CopyFabric(info, &out);
  return out;
}

absl::StatusOr<bool> Device::PersistenceMode() const {
  int mode = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_persistence_mode,
                       "nvmlDeviceGetPersistenceMode", AsDevice(handle_), &mode));
  return mode == abi::kFeatureEnabled;
}

absl::Status Device::SetPersistenceMode(bool enabled) const {
  return Call(*library_, library_->api().device_set_persistence_mode,
              "nvmlDeviceSetPersistenceMode", AsDevice(handle_),
              enabled ? abi::kFeatureEnabled : abi::kFeatureDisabled);
}

absl::StatusOr<nvml::ComputeMode> Device::ComputeMode() const {
  int mode = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_compute_mode,
                       "nvmlDeviceGetComputeMode", AsDevice(handle_), &mode));
  return static_cast<nvml::ComputeMode>(mode);
}

absl::Status Device::SetComputeMode(nvml::ComputeMode mode) const {
  return Call(*library_, library_->api().device_set_compute_mode, "nvmlDeviceSetComputeMode",
              AsDevice(handle_), static_cast<int>(mode));
}

}  // namespace dra::nvml
