// Exported NVML entry points for MIG at the device level: modes, GPU instance profiles and
// placements, GPU instance lookup, MIG device handles and their identity.
//
// Profile queries answer whether or not MIG is enabled (the upstream driver inspects profiles of
// Hopper GPUs with MIG off); instance queries on a MIG-capable GPU with MIG off are NOT_SUPPORTED.

#include <cstring>
#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mig_logic.h"

using mock_nvml::abi::DeviceHandle;
using mock_nvml::abi::GpuInstanceHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

// Resolves a full-GPU handle of a MIG-capable GPU (MIG device handles are INVALID_ARGUMENT,
// GPUs without MIG NOT_SUPPORTED) and runs `body` with its current state.
template <typename Body>
Return WithMigGpu(const char* function, DeviceHandle device, Body body) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    if (obj->mig) return abi::kErrorInvalidArgument;
    if (!gpu->mig_table) return abi::kErrorNotSupported;
    mn::GpuState state;
    if (Return ret = mn::ReadGpuState(ctx, obj->gpu, &state); ret != abi::kSuccess) return ret;
    return body(ctx, *obj, *gpu, state);
  });
}

template <typename Info>
void FillGiProfile(const mn::GiProfile& p, Info* info) {
  info->id = p.id;
  info->is_p2p_supported = p.p2p ? 1 : 0;
  info->slice_count = p.slices;
  info->instance_count = p.instance_count;
  info->multiprocessor_count = p.multiprocessors;
  info->copy_engine_count = p.copy_engines;
  info->decoder_count = p.decoders;
  info->encoder_count = p.encoders;
  info->jpeg_count = p.jpegs;
  info->ofa_count = p.ofas;
  info->memory_size_mb = p.memory_mib;
}

Return LookupGiProfile(const mn::GpuSpec& gpu, unsigned int profile, const mn::GiProfile** out) {
  if (profile >= abi::kGpuInstanceProfileCount) return abi::kErrorInvalidArgument;
  *out = mn::FindGiProfileByIndex(gpu, profile);
  return *out ? abi::kSuccess : abi::kErrorNotSupported;
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlDeviceGetMigMode(DeviceHandle device, unsigned int* current,
                                             unsigned int* pending) {
  return WithMigGpu(
      "nvmlDeviceGetMigMode", device,
      [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec&, const mn::GpuState& state) {
        if (current == nullptr || pending == nullptr) {
          return abi::kErrorInvalidArgument;
        }
        *current = state.mig_current;
        *pending = state.mig_pending;
        return abi::kSuccess;
      });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstanceProfileInfo(DeviceHandle device,
                                                            unsigned int profile,
                                                            abi::GpuInstanceProfileInfo* info) {
  return WithMigGpu(
      "nvmlDeviceGetGpuInstanceProfileInfo", device,
      [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu, const mn::GpuState&) {
        const mn::GiProfile* p = nullptr;
        if (info == nullptr) return abi::kErrorInvalidArgument;
        if (Return ret = LookupGiProfile(gpu, profile, &p); ret != abi::kSuccess) {
          return ret;
        }
        std::memset(info, 0, sizeof(*info));
        FillGiProfile(*p, info);
        return abi::kSuccess;
      });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstanceProfileInfoV(DeviceHandle device,
                                                             unsigned int profile,
                                                             abi::GpuInstanceProfileInfoV2* info) {
  return WithMigGpu(
      "nvmlDeviceGetGpuInstanceProfileInfoV", device,
      [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu, const mn::GpuState&) {
        const mn::GiProfile* p = nullptr;
        if (info == nullptr) return abi::kErrorInvalidArgument;
        if (info->version != abi::kGpuInstanceProfileInfoV2Version) {
          return abi::kErrorArgumentVersionMismatch;
        }
        if (Return ret = LookupGiProfile(gpu, profile, &p); ret != abi::kSuccess) {
          return ret;
        }
        std::memset(info, 0, sizeof(*info));
        info->version = abi::kGpuInstanceProfileInfoV2Version;
        FillGiProfile(*p, info);
        return mn::CopyString("MIG " + p->name, info->name, sizeof(info->name));
      });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    DeviceHandle device, unsigned int profile_id, abi::GpuInstancePlacement* placements,
    unsigned int* count) {
  return WithMigGpu(
      "nvmlDeviceGetGpuInstancePossiblePlacements_v2", device,
      [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu, const mn::GpuState&) {
        const mn::GiProfile* p = mn::FindGiProfileById(gpu, profile_id);
        if (count == nullptr || p == nullptr) return abi::kErrorInvalidArgument;
        const auto n = static_cast<unsigned int>(p->placement_starts.size());
        if (placements == nullptr) {  // a size query
          *count = n;
          return abi::kSuccess;
        }
        if (*count < n) {
          *count = n;
          return abi::kErrorInsufficientSize;
        }
        for (unsigned int i = 0; i < n; ++i) {
          placements[i] = {p->placement_starts[i], p->placement_size};
        }
        *count = n;
        return abi::kSuccess;
      });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstanceRemainingCapacity(DeviceHandle device,
                                                                  unsigned int profile_id,
                                                                  unsigned int* count) {
  return WithMigGpu("nvmlDeviceGetGpuInstanceRemainingCapacity", device,
                    [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu,
                        const mn::GpuState& state) {
                      const mn::GiProfile* p = mn::FindGiProfileById(gpu, profile_id);
                      if (count == nullptr || p == nullptr) return abi::kErrorInvalidArgument;
                      if (state.mig_current != abi::kDeviceMigEnable) {
                        return abi::kErrorNotSupported;
                      }
                      *count = mn::RemainingGpuInstanceCapacity(gpu, state, *p);
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstances(DeviceHandle device, unsigned int profile_id,
                                                  GpuInstanceHandle* gpu_instances,
                                                  unsigned int* count) {
  return WithMigGpu("nvmlDeviceGetGpuInstances", device,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu,
                        const mn::GpuState& state) {
                      const mn::GiProfile* p = mn::FindGiProfileById(gpu, profile_id);
                      if (gpu_instances == nullptr || count == nullptr || p == nullptr) {
                        return abi::kErrorInvalidArgument;
                      }
                      if (state.mig_current != abi::kDeviceMigEnable) {
                        return abi::kErrorNotSupported;
                      }
                      unsigned int n = 0;  // the caller sized the array for instance_count
                      for (const mn::GiState& gi : state.gis) {
                        if (gi.profile_index == p->index) {
                          gpu_instances[n++] = ctx.GiHandle(obj.gpu, gi.id);
                        }
                      }
                      *count = n;
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstanceById(DeviceHandle device, unsigned int id,
                                                     GpuInstanceHandle* gpu_instance) {
  return WithMigGpu("nvmlDeviceGetGpuInstanceById", device,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec&,
                        const mn::GpuState& state) {
                      if (gpu_instance == nullptr) return abi::kErrorInvalidArgument;
                      if (state.mig_current != abi::kDeviceMigEnable) {
                        return abi::kErrorNotSupported;
                      }
                      if (mn::FindGi(state, id) == nullptr) return abi::kErrorNotFound;
                      *gpu_instance = ctx.GiHandle(obj.gpu, id);
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetMaxMigDeviceCount(DeviceHandle device, unsigned int* count) {
  return WithMigGpu(
      "nvmlDeviceGetMaxMigDeviceCount", device,
      [&](mn::Context&, const mn::DeviceObject&, const mn::GpuSpec& gpu,
          const mn::GpuState& state) {
        if (count == nullptr) return abi::kErrorInvalidArgument;
        *count = state.mig_current == abi::kDeviceMigEnable ? gpu.mig_table->compute_slices : 0;
        return abi::kSuccess;
      });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetMigDeviceHandleByIndex(DeviceHandle device, unsigned int index,
                                                            DeviceHandle* mig_device) {
  return WithMigGpu("nvmlDeviceGetMigDeviceHandleByIndex", device,
                    [&](mn::Context& ctx, const mn::DeviceObject& obj, const mn::GpuSpec& gpu,
                        const mn::GpuState& state) {
                      if (mig_device == nullptr || index >= gpu.mig_table->compute_slices) {
                        return abi::kErrorInvalidArgument;
                      }
                      const auto refs = mn::ListMigDevices(state);
                      if (index >= refs.size()) return abi::kErrorNotFound;
                      *mig_device = ctx.MigHandle(obj.gpu, refs[index].gi_id, refs[index].ci_id);
                      return abi::kSuccess;
                    });
}

MOCK_NVML_EXPORT Return nvmlDeviceIsMigDeviceHandle(DeviceHandle device, unsigned int* is_mig) {
  return mn::Guarded("nvmlDeviceIsMigDeviceHandle", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = ctx.Device(device);
    if (obj == nullptr || is_mig == nullptr) return abi::kErrorInvalidArgument;
    *is_mig = obj->mig ? 1 : 0;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetDeviceHandleFromMigDeviceHandle(DeviceHandle mig_device,
                                                                     DeviceHandle* device) {
  return mn::Guarded("nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
                     [&](mn::Context& ctx) -> Return {
                       const mn::DeviceObject* obj = ctx.Device(mig_device);
                       if (obj == nullptr || device == nullptr) return abi::kErrorInvalidArgument;
                       if (!obj->mig) return abi::kErrorInvalidArgument;
                       *device = ctx.GpuHandle(obj->gpu);
                       return abi::kSuccess;
                     });
}

// GPU/compute instance id of a MIG device handle; NOT_SUPPORTED for a full GPU.
MOCK_NVML_EXPORT Return nvmlDeviceGetGpuInstanceId(DeviceHandle device, unsigned int* id) {
  return mn::Guarded("nvmlDeviceGetGpuInstanceId", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = ctx.Device(device);
    if (obj == nullptr || id == nullptr) return abi::kErrorInvalidArgument;
    if (!obj->mig) return abi::kErrorNotSupported;
    *id = obj->gi;
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceGetComputeInstanceId(DeviceHandle device, unsigned int* id) {
  return mn::Guarded("nvmlDeviceGetComputeInstanceId", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = ctx.Device(device);
    if (obj == nullptr || id == nullptr) return abi::kErrorInvalidArgument;
    if (!obj->mig) return abi::kErrorNotSupported;
    *id = obj->ci;
    return abi::kSuccess;
  });
}

static_assert(std::is_same_v<decltype(nvmlDeviceGetMigMode), abi::DeviceGetMigModeFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetGpuInstanceProfileInfo),
                             abi::DeviceGetGpuInstanceProfileInfoFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetGpuInstanceProfileInfoV),
                             abi::DeviceGetGpuInstanceProfileInfoVFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetGpuInstancePossiblePlacements_v2),
                             abi::DeviceGetGpuInstancePossiblePlacementsFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetGpuInstanceRemainingCapacity),
                             abi::DeviceGetGpuInstanceRemainingCapacityFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetGpuInstances), abi::DeviceGetGpuInstancesFn>);
static_assert(
    std::is_same_v<decltype(nvmlDeviceGetGpuInstanceById), abi::DeviceGetGpuInstanceByIdFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetMigDeviceHandleByIndex),
                             abi::DeviceGetMigDeviceHandleByIndexFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceGetDeviceHandleFromMigDeviceHandle),
                             abi::DeviceGetDeviceHandleFromMigDeviceHandleFn>);
