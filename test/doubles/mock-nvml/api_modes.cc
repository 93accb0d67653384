// Exported NVML entry points for persisted per-GPU settings (persistence mode, compute mode, the
// mock-only compute-policy time-slice) and the NVLink fabric info.

#include <cstring>
#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mock_nvml_ext.h"

using mock_nvml::abi::DeviceHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

// Reads one GPU's state for a full-GPU or MIG handle (MIG handles see their parent's settings).
template <typename Out, typename Body>
Return ReadSetting(const char* function, DeviceHandle device, Out* out, Body body) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (out == nullptr) return abi::kErrorInvalidArgument;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    mn::GpuState state;
    if (Return ret = mn::ReadGpuState(ctx, obj->gpu, &state); ret != abi::kSuccess) return ret;
    body(state);
    return abi::kSuccess;
  });
}

// Changes one full GPU's settings; MIG device handles are NOT_SUPPORTED.
Return WriteSetting(const char* function, DeviceHandle device,
                    const std::function<Return(mn::GpuState&)>& fn) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    if (obj->mig) return abi::kErrorNotSupported;
    return mn::MutateGpuState(ctx, obj->gpu, fn);
  });
}

template <typename Info>
void FillFabric(const mn::FabricSpec& f, Info* info) {
  std::memcpy(info->cluster_uuid, f.cluster_uuid.data(), sizeof(info->cluster_uuid));
  info->status = f.status;
  info->clique_id = f.clique_id;
  info->state = f.state;
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlDeviceGetPersistenceMode(DeviceHandle device, int* mode) {
  return ReadSetting("nvmlDeviceGetPersistenceMode", device, mode, [&](const mn::GpuState& s) {
    *mode = s.persistence ? abi::kFeatureEnabled : abi::kFeatureDisabled;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceSetPersistenceMode(DeviceHandle device, int mode) {
  return WriteSetting("nvmlDeviceSetPersistenceMode", device, [&](mn::GpuState& s) {
    if (mode != abi::kFeatureEnabled && mode != abi::kFeatureDisabled) {
      return abi::kErrorInvalidArgument;
    }
    s.persistence = mode == abi::kFeatureEnabled;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetComputeMode(DeviceHandle device, int* mode) {
  return ReadSetting("nvmlDeviceGetComputeMode", device, mode,
                     [&](const mn::GpuState& s) { *mode = s.compute_mode; });
}

MOCK_NVML_EXPORT Return nvmlDeviceSetComputeMode(DeviceHandle device, int mode) {
  return WriteSetting("nvmlDeviceSetComputeMode", device, [&](mn::GpuState& s) {
    if (mode == abi::kComputeModeExclusiveThread) return abi::kErrorNotSupported;
    if (mode != abi::kComputeModeDefault && mode != abi::kComputeModeProhibited &&
        mode != abi::kComputeModeExclusiveProcess) {
      return abi::kErrorInvalidArgument;
    }
    s.compute_mode = mode;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return mockNvmlDeviceGetTimeslice(DeviceHandle device, unsigned int* timeslice) {
  return ReadSetting("mockNvmlDeviceGetTimeslice", device, timeslice,
                     [&](const mn::GpuState& s) { *timeslice = s.timeslice; });
}

MOCK_NVML_EXPORT Return mockNvmlDeviceSetTimeslice(DeviceHandle device, unsigned int timeslice) {
  return WriteSetting("mockNvmlDeviceSetTimeslice", device, [&](mn::GpuState& s) {
    if (timeslice > 3) return abi::kErrorInvalidArgument;
    s.timeslice = timeslice;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuFabricInfo(DeviceHandle device, abi::GpuFabricInfo* info) {
  return mn::Guarded("nvmlDeviceGetGpuFabricInfo", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (info == nullptr) return abi::kErrorInvalidArgument;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    if (!gpu->fabric) return abi::kErrorNotSupported;
    std::memset(info, 0, sizeof(*info));
    FillFabric(*gpu->fabric, info);
    return abi::kSuccess;
  });
}

// Versioned: the caller's `version` picks the v2 or v3 layout; anything else is a mismatch.
MOCK_NVML_EXPORT Return nvmlDeviceGetGpuFabricInfoV(DeviceHandle device,
                                                    abi::GpuFabricInfoV3* info) {
  return mn::Guarded("nvmlDeviceGetGpuFabricInfoV", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (info == nullptr) return abi::kErrorInvalidArgument;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    if (!gpu->fabric) return abi::kErrorNotSupported;
    if (info->version == abi::kGpuFabricInfoV3Version) {
      std::memset(info, 0, sizeof(*info));
      info->version = abi::kGpuFabricInfoV3Version;
      FillFabric(*gpu->fabric, info);
      info->health_mask = gpu->fabric->health_mask;
      return abi::kSuccess;
    }
    if (info->version == abi::kGpuFabricInfoV2Version) {
      auto* v2 = reinterpret_cast<abi::GpuFabricInfoV2*>(info);
      std::memset(v2, 0, sizeof(*v2));
      v2->version = abi::kGpuFabricInfoV2Version;
      FillFabric(*gpu->fabric, v2);
      v2->health_mask = gpu->fabric->health_mask;
      return abi::kSuccess;
    }
    return abi::kErrorArgumentVersionMismatch;
  });
}

static_assert(std::is_same_v<decltype(nvmlDeviceSetComputeMode), abi::DeviceSetIntFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetGpuFabricInfo), abi::DeviceGetGpuFabricInfoFn>);
static_assert(
    std::is_same_v<decltype(nvmlDeviceGetGpuFabricInfoV), abi::DeviceGetGpuFabricInfoVFn>);
static_assert(
    std::is_same_v<decltype(mockNvmlDeviceSetTimeslice), mn::MockNvmlDeviceSetTimesliceFn>);
static_assert(
    std::is_same_v<decltype(mockNvmlDeviceGetTimeslice), mn::MockNvmlDeviceGetTimesliceFn>);
