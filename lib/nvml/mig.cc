// MigDevice, GpuInstance and ComputeInstance.

#include <algorithm>
#include <cstring>

#include "lib/common/status.h"
#include "lib/nvml/call.h"
#include "lib/nvml/nvml.h"

namespace dra::nvml {
namespace {

using internal::AsComputeInstance;
using internal::AsDevice;
using internal::AsGpuInstance;
using internal::Call;

template <typename Info>
ComputeInstanceProfile ToProfile(unsigned int index, const Info& in) {
  ComputeInstanceProfile p;
  p.index = index;
  p.id = in.id;
  p.slice_count = in.slice_count;
  p.instance_count = in.instance_count;
  p.multiprocessor_count = in.multiprocessor_count;
  p.shared_copy_engine_count = in.shared_copy_engine_count;
  p.shared_decoder_count = in.shared_decoder_count;
  p.shared_encoder_count = in.shared_encoder_count;
  p.shared_jpeg_count = in.shared_jpeg_count;
  p.shared_ofa_count = in.shared_ofa_count;
  return p;
}

}  // namespace

// ---- MigDevice ----------------------------------------------------------------------------------

absl::StatusOr<std::string> MigDevice::Uuid() const {
  return internal::GetDeviceString(*library_, library_->api().device_get_uuid, "nvmlDeviceGetUUID",
                                   handle_);
}

absl::StatusOr<std::string> MigDevice::Name() const {
  return internal::GetDeviceString(*library_, library_->api().device_get_name, "nvmlDeviceGetName",
                                   handle_);
}

absl::StatusOr<MemoryInfo> MigDevice::Memory() const {
  return internal::GetDeviceMemory(*library_, handle_);
}

absl::StatusOr<unsigned int> MigDevice::GpuInstanceId() const {
  unsigned int id = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_gpu_instance_id,
                       "nvmlDeviceGetGpuInstanceId", AsDevice(handle_), &id));
  return id;
}

absl::StatusOr<unsigned int> MigDevice::ComputeInstanceId() const {
  unsigned int id = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_compute_instance_id,
                       "nvmlDeviceGetComputeInstanceId", AsDevice(handle_), &id));
  return id;
}

absl::StatusOr<MigDeviceAttributes> MigDevice::Attributes() const {
  abi::DeviceAttributes a{};
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_attributes,
                       "nvmlDeviceGetAttributes_v2", AsDevice(handle_), &a));
  return MigDeviceAttributes{a.multiprocessor_count,
                             a.shared_copy_engine_count,
                             a.shared_decoder_count,
                             a.shared_encoder_count,
                             a.shared_jpeg_count,
                             a.shared_ofa_count,
                             a.gpu_instance_slice_count,
                             a.compute_instance_slice_count,
                             a.memory_size_mb};
}

absl::StatusOr<Device> MigDevice::Parent() const {
  abi::DeviceHandle parent = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_device_handle_from_mig_device_handle,
                       "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", AsDevice(handle_), &parent));
  return Device(library_, parent);
}

// ---- GpuInstance --------------------------------------------------------------------------------

absl::StatusOr<GpuInstanceInfo> GpuInstance::Info() const {
  abi::GpuInstanceInfo info{};
  RETURN_IF_ERROR(Call(*library_, library_->api().gpu_instance_get_info, "nvmlGpuInstanceGetInfo",
                       AsGpuInstance(handle_), &info));
  return GpuInstanceInfo{info.id, info.profile_id, {info.placement.start, info.placement.size}};
}

absl::StatusOr<ComputeInstanceProfile> GpuInstance::ComputeInstanceProfileInfo(
    unsigned int profile_index) const {
  const internal::Api& api = library_->api();
  if (api.gpu_instance_get_compute_instance_profile_info_v != nullptr) {
    abi::ComputeInstanceProfileInfoV2 info{};
    info.version = abi::kComputeInstanceProfileInfoV2Version;
    RETURN_IF_ERROR(Call(*library_, api.gpu_instance_get_compute_instance_profile_info_v,
                         "nvmlGpuInstanceGetComputeInstanceProfileInfoV", AsGpuInstance(handle_),
                         profile_index, abi::kComputeInstanceEngineProfileShared, &info));
    ComputeInstanceProfile p = ToProfile(profile_index, info);
    p.name = std::string(info.name, strnlen(info.name, sizeof(info.name)));
    return p;
  }
  abi::ComputeInstanceProfileInfo info{};
  RETURN_IF_ERROR(Call(*library_, api.gpu_instance_get_compute_instance_profile_info,
                       "nvmlGpuInstanceGetComputeInstanceProfileInfo", AsGpuInstance(handle_),
                       profile_index, abi::kComputeInstanceEngineProfileShared, &info));
  return ToProfile(profile_index, info);
}

absl::StatusOr<std::vector<ComputeInstanceProfile>> GpuInstance::ComputeInstanceProfiles() const {
  std::vector<ComputeInstanceProfile> out;
  for (unsigned int i = 0; i < abi::kComputeInstanceProfileCount; ++i) {
    absl::StatusOr<ComputeInstanceProfile> profile = ComputeInstanceProfileInfo(i);
    if (IsNvmlError(profile.status(), ReturnCode::kNotSupported) ||
        IsNvmlError(profile.status(), ReturnCode::kInvalidArgument)) {
      continue;
    }
    if (!profile.ok()) return profile.status();
    out.push_back(*std::move(profile));
  }
  return out;
}

absl::StatusOr<ComputeInstance> GpuInstance::CreateComputeInstance(unsigned int profile_id) const {
  abi::ComputeInstanceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().gpu_instance_create_compute_instance,
                       "nvmlGpuInstanceCreateComputeInstance", AsGpuInstance(handle_), profile_id,
                       &handle));
  return ComputeInstance(library_, handle);
}

absl::StatusOr<std::vector<ComputeInstance>> GpuInstance::ComputeInstances(
    const ComputeInstanceProfile& profile) const {
  std::vector<abi::ComputeInstanceHandle> handles(std::max(profile.instance_count, 1u));
  unsigned int count = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().gpu_instance_get_compute_instances,
                       "nvmlGpuInstanceGetComputeInstances", AsGpuInstance(handle_), profile.id,
                       handles.data(), &count));
  std::vector<ComputeInstance> out;
  for (unsigned int i = 0; i < count && i < handles.size(); ++i) {
    out.push_back(ComputeInstance(library_, handles[i]));
  }
  return out;
}

absl::StatusOr<ComputeInstance> GpuInstance::ComputeInstanceById(unsigned int id) const {
  abi::ComputeInstanceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().gpu_instance_get_compute_instance_by_id,
                       "nvmlGpuInstanceGetComputeInstanceById", AsGpuInstance(handle_), id,
                       &handle));
  return ComputeInstance(library_, handle);
}

absl::Status GpuInstance::Destroy() const {
  return Call(*library_, library_->api().gpu_instance_destroy, "nvmlGpuInstanceDestroy",
              AsGpuInstance(handle_));
}

// ---- ComputeInstance ----------------------------------------------------------------------------

absl::StatusOr<ComputeInstanceInfo> ComputeInstance::Info() const {
  abi::ComputeInstanceInfo info{};
  RETURN_IF_ERROR(Call(*library_, library_->api().compute_instance_get_info,
                       "nvmlComputeInstanceGetInfo_v2", AsComputeInstance(handle_), &info));
  return ComputeInstanceInfo{info.id, info.profile_id, {info.placement.start, info.placement.size}};
}

absl::StatusOr<MigDevice> ComputeInstance::AsMigDevice() const {
  abi::ComputeInstanceInfo info{};
  RETURN_IF_ERROR(Call(*library_, library_->api().compute_instance_get_info,
                       "nvmlComputeInstanceGetInfo_v2", AsComputeInstance(handle_), &info));
  return MigDevice(library_, info.device);
}

absl::Status ComputeInstance::Destroy() const {
  return Call(*library_, library_->api().compute_instance_destroy, "nvmlComputeInstanceDestroy",
              AsComputeInstance(handle_));
}

}  // namespace dra::nvml
