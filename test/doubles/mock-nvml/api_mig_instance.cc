// Exported NVML entry points on GPU instance and compute instance handles (queries only; creation
// and destruction are in api_mig_mutate.cc). A handle whose instance was destroyed answers
// INVALID_ARGUMENT.

#include <cstring>
#include <type_traits>

#include "test/doubles/mock-nvml/context.h"
#include "test/doubles/mock-nvml/mig_logic.h"

using mock_nvml::abi::ComputeInstanceHandle;
using mock_nvml::abi::GpuInstanceHandle;
using mock_nvml::abi::Return;
namespace abi = dra::nvml::abi;
namespace mn = mock_nvml;

namespace {

struct GiView {
  const mn::GpuInstanceObject* obj = nullptr;
  const mn::GpuSpec* gpu = nullptr;
  const mn::GiProfile* profile = nullptr;
  mn::GiState gi;
};

Return ResolveGi(mn::Context& ctx, GpuInstanceHandle handle, GiView* view) {
  view->obj = ctx.Gi(handle);
  if (view->obj == nullptr) return abi::kErrorInvalidArgument;
  view->gpu = &ctx.spec().gpus[view->obj->gpu];
  mn::GpuState state;
  if (Return ret = mn::ReadGpuState(ctx, view->obj->gpu, &state); ret != abi::kSuccess) return ret;
  const mn::GiState* gi = mn::FindGi(state, view->obj->gi);
  if (gi == nullptr) return abi::kErrorInvalidArgument;
  view->gi = *gi;
  view->profile = mn::FindGiProfileByIndex(*view->gpu, gi->profile_index);
  return view->profile ? abi::kSuccess : abi::kErrorUnknown;
}

template <typename Body>
Return WithGi(const char* function, GpuInstanceHandle handle, Body body) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    GiView view;
    if (Return ret = ResolveGi(ctx, handle, &view); ret != abi::kSuccess) return ret;
    return body(ctx, view);
  });
}

Return LookupCiProfile(const GiView& view, unsigned int profile, unsigned int engine_profile,
                       const mn::CiProfile** out) {
  if (profile >= abi::kComputeInstanceProfileCount ||
      engine_profile >= abi::kComputeInstanceEngineProfileCount) {
    return abi::kErrorInvalidArgument;
  }
  *out = mn::FindCiProfile(*view.profile, profile);
  return *out ? abi::kSuccess : abi::kErrorNotSupported;
}

template <typename Info>
void FillCiProfile(const GiView& view, const mn::CiProfile& p, Info* info) {
  info->id = p.index;
  info->slice_count = p.slices;
  info->instance_count = p.instance_count;
  info->multiprocessor_count = p.multiprocessors;
  info->shared_copy_engine_count = view.profile->copy_engines;
  info->shared_decoder_count = view.profile->decoders;
  info->shared_encoder_count = view.profile->encoders;
  info->shared_jpeg_count = view.profile->jpegs;
  info->shared_ofa_count = view.profile->ofas;
}

// v2 reports the MIG device handle in `device` (the upstream driver relies on it); v1 the parent.
Return ComputeInstanceInfo(const char* function, ComputeInstanceHandle handle,
                           abi::ComputeInstanceInfo* info, bool mig_device) {
  return mn::Guarded(function, [&](mn::Context& ctx) -> Return {
    const mn::ComputeInstanceObject* obj = ctx.Ci(handle);
    if (obj == nullptr || info == nullptr) return abi::kErrorInvalidArgument;
    mn::GpuState state;
    if (Return ret = mn::ReadGpuState(ctx, obj->gpu, &state); ret != abi::kSuccess) return ret;
    const mn::GiState* gi = mn::FindGi(state, obj->gi);
    const mn::CiState* ci = gi ? mn::FindCi(*gi, obj->ci) : nullptr;
    if (ci == nullptr) return abi::kErrorInvalidArgument;
    info->device = mig_device ? ctx.MigHandle(obj->gpu, obj->gi, obj->ci) : ctx.GpuHandle(obj->gpu);
    info->gpu_instance = ctx.GiHandle(obj->gpu, obj->gi);
    info->id = ci->id;
    info->profile_id = ci->profile_index;
    info->placement = {ci->start, ci->size};
    return abi::kSuccess;
  });
}

}  // namespace

MOCK_NVML_EXPORT Return nvmlGpuInstanceGetInfo(GpuInstanceHandle gpu_instance,
                                               abi::GpuInstanceInfo* info) {
  return WithGi("nvmlGpuInstanceGetInfo", gpu_instance, [&](mn::Context& ctx, const GiView& v) {
    if (info == nullptr) return abi::kErrorInvalidArgument;
    info->device = ctx.GpuHandle(v.obj->gpu);
    info->id = v.gi.id;
    info->profile_id = v.profile->id;
    info->placement = {v.gi.start, v.gi.size};
    return abi::kSuccess;
  });
}

MOCK_NVML_EXPORT Return nvmlGpuInstanceGetComputeInstanceProfileInfo(
    GpuInstanceHandle gpu_instance, unsigned int profile, unsigned int engine_profile,
    abi::ComputeInstanceProfileInfo* info) {
  return WithGi("nvmlGpuInstanceGetComputeInstanceProfileInfo", gpu_instance,
                [&](mn::Context&, const GiView& v) {
                  const mn::CiProfile* p = nullptr;
                  if (info == nullptr) return abi::kErrorInvalidArgument;
                  if (Return ret = LookupCiProfile(v, profile, engine_profile, &p);
                      ret != abi::kSuccess) {
                    return ret;
                  }
                  std::memset(info, 0, sizeof(*info));
                  FillCiProfile(v, *p, info);
                  return abi::kSuccess;
                });
}

MOCK_NVML_EXPORT Return nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    GpuInstanceHandle gpu_instance, unsigned int profile, unsigned int engine_profile,
    abi::ComputeInstanceProfileInfoV2* info) {
  return WithGi(
      "nvmlGpuInstanceGetComputeInstanceProfileInfoV", gpu_instance,
      [&](mn::Context&, const GiView& v) {
        const mn::CiProfile* p = nullptr;
        if (info == nullptr) return abi::kErrorInvalidArgument;
        if (info->version != abi::kComputeInstanceProfileInfoV2Version) {
          return abi::kErrorArgumentVersionMismatch;
        }
        if (Return ret = LookupCiProfile(v, profile, engine_profile, &p); ret != abi::kSuccess) {
          return ret;
        }
        std::memset(info, 0, sizeof(*info));
        info->version = abi::kComputeInstanceProfileInfoV2Version;
        FillCiProfile(v, *p, info);
        const std::string name = p->slices == v.profile->slices
                                     ? "MIG " + v.profile->name
                                     : "MIG " + std::to_string(p->slices) + "c." + v.profile->name;
        return mn::CopyString(name, info->name, sizeof(info->name));
      });
}

MOCK_NVML_EXPORT Return nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    GpuInstanceHandle gpu_instance, unsigned int profile_id, unsigned int* count) {
  return WithGi("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", gpu_instance,
                [&](mn::Context&, const GiView& v) {
                  const mn::CiProfile* p = mn::FindCiProfile(*v.profile, profile_id);
                  if (count == nullptr || p == nullptr) return abi::kErrorInvalidArgument;
                  *count = mn::RemainingComputeInstanceCapacity(*v.profile, v.gi, *p);
                  return abi::kSuccess;
                });
}

MOCK_NVML_EXPORT Return nvmlGpuInstanceGetComputeInstances(GpuInstanceHandle gpu_instance,
                                                           unsigned int profile_id,
                                                           ComputeInstanceHandle* compute_instances,
                                                           unsigned int* count) {
  return WithGi("nvmlGpuInstanceGetComputeInstances", gpu_instance,
                [&](mn::Context& ctx, const GiView& v) {
                  if (compute_instances == nullptr || count == nullptr ||
                      mn::FindCiProfile(*v.profile, profile_id) == nullptr) {
                    return abi::kErrorInvalidArgument;
                  }
                  unsigned int n = 0;  // the caller sized the array for instance_count
                  for (const mn::CiState& ci : v.gi.cis) {
                    if (ci.profile_index == profile_id) {
                      compute_instances[n++] = ctx.CiHandle(v.obj->gpu, v.gi.id, ci.id);
                    }
                  }
                  *count = n;
                  return abi::kSuccess;
                });
}

MOCK_NVML_EXPORT Return nvmlGpuInstanceGetComputeInstanceById(
    GpuInstanceHandle gpu_instance, unsigned int id, ComputeInstanceHandle* compute_instance) {
  return WithGi("nvmlGpuInstanceGetComputeInstanceById", gpu_instance,
                [&](mn::Context& ctx, const GiView& v) {
                  if (compute_instance == nullptr) return abi::kErrorInvalidArgument;
                  if (mn::FindCi(v.gi, id) == nullptr) return abi::kErrorNotFound;
                  *compute_instance = ctx.CiHandle(v.obj->gpu, v.gi.id, id);
                  return abi::kSuccess;
                });
}

MOCK_NVML_EXPORT Return nvmlComputeInstanceGetInfo_v2(ComputeInstanceHandle compute_instance,
                                                      abi::ComputeInstanceInfo* info) {
  return ComputeInstanceInfo("nvmlComputeInstanceGetInfo_v2", compute_instance, info, true);
}

MOCK_NVML_EXPORT Return nvmlComputeInstanceGetInfo(ComputeInstanceHandle compute_instance,
                                                   abi::ComputeInstanceInfo* info) {
  return ComputeInstanceInfo("nvmlComputeInstanceGetInfo", compute_instance, info, false);
}

static_assert(std::is_same_v<decltype(nvmlGpuInstanceGetInfo), abi::GpuInstanceGetInfoFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceGetComputeInstanceProfileInfo),
                             abi::GpuInstanceGetComputeInstanceProfileInfoFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceGetComputeInstanceProfileInfoV),
                             abi::GpuInstanceGetComputeInstanceProfileInfoVFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceGetComputeInstanceRemainingCapacity),
                             abi::GpuInstanceGetComputeInstanceRemainingCapacityFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceGetComputeInstances),
                             abi::GpuInstanceGetComputeInstancesFn>);
static_assert(std::is_same_v<decltype(nvmlGpuInstanceGetComputeInstanceById),
                             abi::GpuInstanceGetComputeInstanceByIdFn>);
static_assert(
    std::is_same_v<decltype(nvmlComputeInstanceGetInfo_v2), abi::ComputeInstanceGetInfoFn>);
