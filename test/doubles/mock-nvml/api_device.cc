// Exported NVML entry points: per-device identity, PCI, memory, architecture and modes. MIG device
// handles answer the parent's values where real drivers do (architecture, PCI, ...), and their own
// for name, UUID and memory.

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mig_logic.h"

using mock_nvml::abi::DeviceHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

// Runs `body` with the resolved device; INVALID_ARGUMENT for foreign handles or null outputs.
template <typename Out, typename Body>
Return WithDevice(const char* function, DeviceHandle device, Out* out, Body body) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (out == nullptr) return abi::kErrorInvalidArgument;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    return body(ctx, *obj, *gpu);
  });
}

// The GI, its profile and the CI behind a MIG device handle, or INVALID_ARGUMENT once destroyed.
struct MigView {
  mn::GiState gi;
  mn::CiState ci;
  const mn::GiProfile* gi_profile = nullptr;
  const mn::CiProfile* ci_profile = nullptr;
};

Return ResolveMig(mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu,
                  MigView* view) {
  mn::GpuState state;
  if (Return ret = mn::ReadGpuState(ctx, obj.gpu, &state); ret != abi::kSuccess) return ret;
  const mn::GiState* gi = mn::FindGi(state, obj.gi);
  const mn::CiState* ci = gi ? mn::FindCi(*gi, obj.ci) : nullptr;
  if (ci == nullptr) return abi::kErrorInvalidArgument;
  view->gi = *gi;
  view->ci = *ci;
  view->gi_profile = mn::FindGiProfileByIndex(gpu, gi->profile_index);
  view->ci_profile =
      view->gi_profile ? mn::FindCiProfile(*view->gi_profile, ci->profile_index) : nullptr;
  return view->ci_profile ? abi::kSuccess : abi::kErrorUnknown;
}

// "1g.5gb" for a full-size CI, "1c.3g.20gb" for a smaller one.
std::string MigProfileName(const MigView& v) {
  if (v.ci_profile->slices == v.gi_profile->slices) return v.gi_profile->name;
  return std::to_string(v.ci_profile->slices) + "c." + v.gi_profile->name;
}

Return GetPciInfo(const char* function, DeviceHandle device, abi::PciInfo* pci) {
  return WithDevice(
      function, device, pci, [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
        std::memset(pci, 0, sizeof(*pci));
        std::snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%04X:%02X:%02X.0",
                      gpu.pci_domain, gpu.pci_bus, gpu.pci_device);
        std::snprintf(pci->bus_id, sizeof(pci->bus_id), "%08X:%02X:%02X.0", gpu.pci_domain,
                      gpu.pci_bus, gpu.pci_device);
        pci->domain = gpu.pci_domain;
        pci->bus = gpu.pci_bus;
        pci->device = gpu.pci_device;
        pci->pci_device_id = gpu.pci_device_id;
        pci->pci_subsystem_id = gpu.pci_subsystem_id;
        return abi::kSuccess;
      });
}

// Total/reserved/used of a full GPU or a MIG device (the GPU instance's memory). `used` includes
// `reserved`, as in both nvmlMemory_t and nvmlMemory_v2_t.
Return GetMemory(mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu,
                 unsigned long long* total, unsigned long long* reserved,
                 unsigned long long* used) {
  if (!obj.mig) {
    *total = gpu.memory_total;
    *reserved = gpu.memory_reserved;
    *used = gpu.memory_used;
    return abi::kSuccess;
  }
  MigView v;
  if (Return ret = ResolveMig(ctx, obj, gpu, &v); ret != abi::kSuccess) return ret;
  *total = v.gi_profile->memory_mib << 20;
  *reserved = 0;
  *used = 16ULL << 20;  // a small context footprint, like a fresh MIG device shows
  return abi::kSuccess;
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlDeviceGetName(DeviceHandle device, char* name, unsigned int length) {
  return WithDevice("nvmlDeviceGetName", device, name,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu) {
                      if (!obj.mig) return mn::CopyString(gpu.name, name, length);
                      MigView v;
                      if (Return ret = ResolveMig(ctx, obj, gpu, &v); ret != abi::kSuccess) {
                        return ret;
                      }
                      return mn::CopyString(gpu.name + " MIG " + MigProfileName(v), name, length);
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetUUID(DeviceHandle device, char* uuid, unsigned int length) {
  return WithDevice("nvmlDeviceGetUUID", device, uuid,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu) {
                      if (!obj.mig) return mn::CopyString(gpu.uuid, uuid, length);
                      MigView v;
                      if (Return ret = ResolveMig(ctx, obj, gpu, &v); ret != abi::kSuccess) {
                        return ret;
                      }
                      return mn::CopyString(v.ci.uuid, uuid, length);
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetMinorNumber(DeviceHandle device, unsigned int* minor) {
  return WithDevice("nvmlDeviceGetMinorNumber", device, minor,
                    [&](mn::Context&, const mn::DeviceObject& obj, const mn::GpuSpec& gpu) {
                      if (obj.mig) return abi::kErrorNotSupported;
                      *minor = gpu.minor;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetIndex(DeviceHandle device, unsigned int* index) {
  return WithDevice("nvmlDeviceGetIndex", device, index,
                    [&](mn::Context&, const mn::DeviceObject& obj, const mn::GpuSpec&) {
                      if (obj.mig) return abi::kErrorNotSupported;
                      *index = obj.gpu;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetPciInfo_v3(DeviceHandle device, abi::PciInfo* pci) {
  return GetPciInfo("nvmlDeviceGetPciInfo_v3", device, pci);
}
MOCK_NVML_EXPORT Return nvmlDeviceGetPciInfo_v2(DeviceHandle device, abi::PciInfo* pci) {
  return GetPciInfo("nvmlDeviceGetPciInfo_v2", device, pci);
}

MOCK_NVML_EXPORT Return nvmlDeviceGetMemoryInfo(DeviceHandle device, abi::Memory* memory) {
  return WithDevice("nvmlDeviceGetMemoryInfo", device, memory,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu) {
                      unsigned long long total, reserved, used;
                      Return ret = GetMemory(ctx, obj, gpu, &total, &reserved, &used);
                      if (ret == abi::kSuccess) *memory = {total, total - used, used};
                      return ret;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetMemoryInfo_v2(DeviceHandle device, abi::MemoryV2* memory) {
  return WithDevice("nvmlDeviceGetMemoryInfo_v2", device, memory,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu) {
                      if (memory->version != abi::kMemoryV2Version) {
                        return abi::kErrorArgumentVersionMismatch;
                      }
                      unsigned long long total, reserved, used;
                      Return ret = GetMemory(ctx, obj, gpu, &total, &reserved, &used);
                      if (ret == abi::kSuccess) {
                        *memory = {abi::kMemoryV2Version, total, reserved, total - used, used};
                      }
                      return ret;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetArchitecture(DeviceHandle device, unsigned int* arch) {
  return WithDevice("nvmlDeviceGetArchitecture", device, arch,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
                      *arch = gpu.architecture;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetBrand(DeviceHandle device, int* brand) {
  return WithDevice("nvmlDeviceGetBrand", device, brand,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
                      *brand = gpu.brand;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetCudaComputeCapability(DeviceHandle device, int* major,
                                                           int* minor) {
  return WithDevice("nvmlDeviceGetCudaComputeCapability", device, major,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
                      if (minor == nullptr) return abi::kErrorInvalidArgument;
                      *major = gpu.cc_major;
                      *minor = gpu.cc_minor;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetVirtualizationMode(DeviceHandle device, int* mode) {
  return WithDevice("nvmlDeviceGetVirtualizationMode", device, mode,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
                      *mode = gpu.virtualization_mode;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetAddressingMode(DeviceHandle device,
                                                    abi::DeviceAddressingMode* mode) {
  return WithDevice("nvmlDeviceGetAddressingMode", device, mode,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
                      if (mode->version != abi::kDeviceAddressingModeV1Version) {
                        return abi::kErrorArgumentVersionMismatch;
                      }
                      if (!gpu.addressing_mode) return abi::kErrorNotSupported;
                      mode->value = *gpu.addressing_mode;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetModuleId(DeviceHandle device, unsigned int* module_id) {
  return WithDevice("nvmlDeviceGetModuleId", device, module_id,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu) {
                      if (!gpu.module_id) return abi::kErrorNotSupported;
                      *module_id = *gpu.module_id;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetAttributes_v2(DeviceHandle device,
                                                   abi::DeviceAttributes* attributes) {
  return WithDevice("nvmlDeviceGetAttributes_v2", device, attributes,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu) {
                      if (!obj.mig) return abi::kErrorNotSupported;
                      MigView v;
                      if (Return ret = ResolveMig(ctx, obj, gpu, &v); ret != abi::kSuccess) {
                        return ret;
                      }
                      *attributes = {v.ci_profile->multiprocessors, v.gi_profile->copy_engines,
                                     v.gi_profile->decoders,        v.gi_profile->encoders,
                                     v.gi_profile->jpegs,           v.gi_profile->ofas,
                                     v.gi_profile->slices,          v.ci_profile->slices,
                                     v.gi_profile->memory_mib};
                      return abi::kSuccess;
                    });
}

static_assert(std::is_same_v<decltype(nvmlDeviceGetName), abi::DeviceGetStringFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetMinorNumber), abi::DeviceGetUintFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetPciInfo_v3), abi::DeviceGetPciInfoFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetMemoryInfo), abi::DeviceGetMemoryInfoFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetMemoryInfo_v2), abi::DeviceGetMemoryInfoV2Fn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetBrand), abi::DeviceGetIntFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetCudaComputeCapability),
                             abi::DeviceGetCudaComputeCapabilityFn>);
static_assert(
    std::is_same_v<decltype(nvmlDeviceGetAddressingMode), abi::DeviceGetAddressingModeFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetAttributes_v2), abi::DeviceGetAttributesFn>);
