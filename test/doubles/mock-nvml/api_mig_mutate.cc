// Exported NVML entry points that change MIG state: mode, GPU instance and compute instance
// creation and destruction. Each runs as one read-modify-write of state.json under the exclusive
// lock, so concurrent processes serialize and all see the result.

#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mig_logic.h"

using mock_nvml::abi::ComputeInstanceHandle;
using mock_nvml::abi::DeviceHandle;
using mock_nvml::abi::GpuInstanceHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

// `placement` null with `with_placement` false: the first free placement is taken.
Return CreateGi(const char* function, DeviceHandle device, unsigned int profile_id,
                bool with_placement, const abi::GpuInstancePlacement* placement,
                GpuInstanceHandle* gpu_instance) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (gpu_instance == nullptr || (with_placement && placement == nullptr)) {
      return abi::kErrorInvalidArgument;
    }
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    if (obj->mig) return abi::kErrorInvalidArgument;
    if (!gpu->mig_table) return abi::kErrorNotSupported;
    if (placement != nullptr) {
      const mn::GiProfile* p = mn::FindGiProfileById(*gpu, profile_id);
      if (p == nullptr || placement->size != p->placement_size) return abi::kErrorInvalidArgument;
    }
    unsigned int gi_id = 0;
    Return ret = mn::MutateGpuState(ctx, obj->gpu, [&](mn::GpuState& state) {
      return mn::CreateGpuInstance(*gpu, state, profile_id, placement ? &placement->start : nullptr,
                                   &gi_id);
    });
    if (ret == abi::kSuccess) *gpu_instance = ctx.GiHandle(obj->gpu, gi_id);
    return ret;
  });
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlDeviceSetMigMode(DeviceHandle device, unsigned int mode,
                                             Return* activation_status) {
  return mn::Guarded("nvmlDeviceSetMigMode", [&](mn::Context& ctx) -> Return {
    const mn::DeviceObject* obj = nullptr;
    const mn::GpuSpec* gpu = nullptr;
    if (activation_status == nullptr) return abi::kErrorInvalidArgument;
    if (Return ret = mn::ResolveGpu(ctx, device, &obj, &gpu); ret != abi::kSuccess) return ret;
    if (obj->mig) return abi::kErrorInvalidArgument;
    return mn::MutateGpuState(ctx, obj->gpu, [&](mn::GpuState& state) {
      return mn::SetMigMode(*gpu, state, mode, activation_status);
    });
  });
}

MOCK_NVML_EXPORT Return nvmlDeviceCreateGpuInstance(DeviceHandle device, unsigned int profile_id,
                                                    GpuInstanceHandle* gpu_instance) {
  return CreateGi("nvmlDeviceCreateGpuInstance", device, profile_id, false, nullptr, gpu_instance);
}

MOCK_NVML_EXPORT Return nvmlDeviceCreateGpuInstanceWithPlacement(
    DeviceHandle device, unsigned int profile_id, const abi::GpuInstancePlacement* placement,
    GpuInstanceHandle* gpu_instance) {
  return CreateGi("nvmlDeviceCreateGpuInstanceWithPlacement", device, profile_id, true, placement,
                  gpu_instance);
}

MOCK_NVML_EXPORT Return nvmlGpuInstanceDestroy(GpuInstanceHandle gpu_instance) {
  return mn::Guarded("nvmlGpuInstanceDestroy", [&](mn::Context& ctx) -> Return {
    const mn::GpuInstanceObject* obj = ctx.Gi(gpu_instance);
    if (obj == nullptr) return abi::kErrorInvalidArgument;
    return mn::MutateGpuState(
        ctx, obj->gpu, [&](mn::GpuState& state) { return mn::DestroyGpuInstance(state, obj->gi); });
  });
}

MOCK_NVML_EXPORT Return
nvmlGpuInstanceCreateComputeInstance(GpuInstanceHandle gpu_instance, unsigned int profile_id,
                                     ComputeInstanceHandle* compute_instance) {
  return mn::Guarded("nvmlGpuInstanceCreateComputeInstance", [&](mn::Context& ctx) -> Return {
    const mn::GpuInstanceObject* obj = ctx.Gi(gpu_instance);
    if (obj == nullptr || compute_instance == nullptr) return abi::kErrorInvalidArgument;
    const mn::GpuSpec& gpu = ctx.spec().gpus[obj->gpu];
    unsigned int ci_id = 0;
    Return ret = mn::MutateGpuState(ctx, obj->gpu, [&](mn::GpuState& state) {
      return mn::CreateComputeInstance(gpu, state, gpu.uuid, obj->gi, profile_id, &ci_id);
    });
    if (ret == abi::kSuccess) *compute_instance = ctx.CiHandle(obj->gpu, obj->gi, ci_id);
    return ret;
  });
}

MOCK_NVML_EXPORT Return nvmlComputeInstanceDestroy(ComputeInstanceHandle compute_instance) {
  return mn::Guarded("nvmlComputeInstanceDestroy", [&](mn::Context& ctx) -> Return {
    const mn::ComputeInstanceObject* obj = ctx.Ci(compute_instance);
    if (obj == nullptr) return abi::kErrorInvalidArgument;
    return mn::MutateGpuState(ctx, obj->gpu, [&](mn::GpuState& state) {
      return mn::DestroyComputeInstance(state, obj->gi, obj->ci);
    });
  });
}

static_assert(std::is_same_v<decltype(nvmlDeviceSetMigMode), abi::DeviceSetMigModeFn>);
static_assert(
    std::is_same_v<decltype(nvmlDeviceCreateGpuInstance), abi::DeviceCreateGpuInstanceFn>);
static_assert(std::is_same_v<decltype(nvmlDeviceCreateGpuInstanceWithPlacement),
                             abi::DeviceCreateGpuInstanceWithPlacementFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceDestroy), abi::GpuInstanceDestroyFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceCreateComputeInstance),
                             abi::GpuInstanceCreateComputeInstanceFn>);
static_assert(std::is_same_v<decltype(nvmlComputeInstanceDestroy), abi::ComputeInstanceDestroyFn>);
