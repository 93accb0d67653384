// Device: MIG mode, GPU instance profiles and placements, GPU instances and MIG device handles.

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"
#include "lib/nvml/call.h"
#include "lib/nvml/nvml.h"

namespace dra::nvml {
namespace {

using internal::AsDevice;
using internal::Call;

template <typename Info>
GpuInstanceProfile ToProfile(unsigned int index, const Info& in) {
  GpuInstanceProfile p;
  p.index = index;
  p.id = in.id;
  p.p2p_supported = in.is_p2p_supported != 0;
  p.slice_count = in.slice_count;
  p.instance_count = in.instance_count;
  p.multiprocessor_count = in.multiprocessor_count;
  p.copy_engine_count = in.copy_engine_count;
  p.decoder_count = in.decoder_count;
  p.encoder_count = in.encoder_count;
  p.jpeg_count = in.jpeg_count;
  p.ofa_count = in.ofa_count;
  p.memory_size_mb = in.memory_size_mb;
  return p;
}

// The profile "does not exist here" answers that profile scans skip (docs/compatibility.md
// "Devices").
bool IsAbsentProfile(const absl::Status& status) {
  return IsNvmlError(status, ReturnCode::kNotSupported) ||
         IsNvmlError(status, ReturnCode::kInvalidArgument);
}

}  // namespace

absl::StatusOr<MigModeInfo> Device::MigMode() const {
  unsigned int current = 0, pending = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_mig_mode, "nvmlDeviceGetMigMode",
                       AsDevice(handle_), &current, &pending));
  return MigModeInfo{current == abi::kDeviceMigEnable, pending == abi::kDeviceMigEnable};
}

absl::StatusOr<ReturnCode> Device::SetMigMode(bool enabled) const {
  abi::Return activation = abi::kSuccess;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_set_mig_mode, "nvmlDeviceSetMigMode",
                       AsDevice(handle_), enabled ? abi::kDeviceMigEnable : abi::kDeviceMigDisable,
                       &activation));
  return static_cast<ReturnCode>(activation);
}

absl::StatusOr<GpuInstanceProfile> Device::GpuInstanceProfileInfo(
    unsigned int profile_index) const {
  const internal::Api& api = library_->api();
  if (api.device_get_gpu_instance_profile_info_v != nullptr) {
    abi::GpuInstanceProfileInfoV2 info{};
    info.version = abi::kGpuInstanceProfileInfoV2Version;
    RETURN_IF_ERROR(Call(*library_, api.device_get_gpu_instance_profile_info_v,
                         "nvmlDeviceGetGpuInstanceProfileInfoV", AsDevice(handle_), profile_index,
                         &info));
    GpuInstanceProfile p = ToProfile(profile_index, info);
    p.name = std::string(info.name, strnlen(info.name, sizeof(info.name)));
    return p;
  }
  abi::GpuInstanceProfileInfo info{};
  RETURN_IF_ERROR(Call(*library_, api.device_get_gpu_instance_profile_info,
                       "nvmlDeviceGetGpuInstanceProfileInfo", AsDevice(handle_), profile_index,
                       &info));
  return ToProfile(profile_index, info);
}

absl::StatusOr<std::vector<GpuInstanceProfile>> Device::GpuInstanceProfiles() const {
  std::vector<GpuInstanceProfile> profiles;
  for (unsigned int i = 0; i < abi::kGpuInstanceProfileCount; ++i) {
    absl::StatusOr<GpuInstanceProfile> profile = GpuInstanceProfileInfo(i);
    if (IsAbsentProfile(profile.status())) continue;
    if (!profile.ok()) return profile.status();
    profiles.push_back(*std::move(profile));
  }
  return profiles;
}

absl::StatusOr<std::vector<Placement>> Device::GpuInstancePossiblePlacements(
    unsigned int profile_id) const {
  const auto fn = library_->api().device_get_gpu_instance_possible_placements;
  constexpr char kName[] = "nvmlDeviceGetGpuInstancePossiblePlacements_v2";
  unsigned int count = 0;
  RETURN_IF_ERROR(Call(*library_, fn, kName, AsDevice(handle_), profile_id,
                       static_cast<abi::GpuInstancePlacement*>(nullptr), &count));
  std::vector<abi::GpuInstancePlacement> raw(count);
  if (count > 0) {
    RETURN_IF_ERROR(Call(*library_, fn, kName, AsDevice(handle_), profile_id, raw.data(), &count));
  }
  std::vector<Placement> placements;
  for (unsigned int i = 0; i < count && i < raw.size(); ++i) {
    placements.push_back({raw[i].start, raw[i].size});
  }
  return placements;
}

absl::StatusOr<unsigned int> Device::GpuInstanceRemainingCapacity(unsigned int profile_id) const {
  unsigned int count = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_gpu_instance_remaining_capacity,
                       "nvmlDeviceGetGpuInstanceRemainingCapacity", AsDevice(handle_), profile_id,
                       &count));
  return count;
}

absl::StatusOr<std::vector<GpuInstance>> Device::GpuInstances(
    const GpuInstanceProfile& profile) const {
  // NVML fills up to the profile's instance count, which sizes the array.
  std::vector<abi::GpuInstanceHandle> handles(std::max(profile.instance_count, 1u));
  unsigned int count = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_gpu_instances,
                       "nvmlDeviceGetGpuInstances", AsDevice(handle_), profile.id, handles.data(),
                       &count));
  std::vector<GpuInstance> out;
  for (unsigned int i = 0; i < count && i < handles.size(); ++i) {
    out.push_back(GpuInstance(library_, handles[i]));
  }
  return out;
}

absl::StatusOr<std::vector<GpuInstance>> Device::AllGpuInstances() const {
  ASSIGN_OR_RETURN(std::vector<GpuInstanceProfile> profiles, GpuInstanceProfiles());
  std::vector<std::pair<unsigned int, GpuInstance>> by_id;
  for (const GpuInstanceProfile& profile : profiles) {
    ASSIGN_OR_RETURN(std::vector<GpuInstance> instances, GpuInstances(profile));
    for (const GpuInstance& gi : instances) {
      ASSIGN_OR_RETURN(GpuInstanceInfo info, gi.Info());
      by_id.emplace_back(info.id, gi);
    }
  }
  std::sort(by_id.begin(), by_id.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<GpuInstance> out;
  out.reserve(by_id.size());
  for (const auto& [id, gi] : by_id) out.push_back(gi);
  return out;
}

absl::StatusOr<GpuInstance> Device::GpuInstanceById(unsigned int id) const {
  abi::GpuInstanceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_gpu_instance_by_id,
                       "nvmlDeviceGetGpuInstanceById", AsDevice(handle_), id, &handle));
  return GpuInstance(library_, handle);
}

absl::StatusOr<GpuInstance> Device::CreateGpuInstance(unsigned int profile_id,
                                                      std::optional<Placement> placement) const {
  const internal::Api& api = library_->api();
  abi::GpuInstanceHandle handle = nullptr;
  if (placement.has_value()) {
    const abi::GpuInstancePlacement raw{placement->start, placement->size};
    RETURN_IF_ERROR(Call(*library_, api.device_create_gpu_instance_with_placement,
                         "nvmlDeviceCreateGpuInstanceWithPlacement", AsDevice(handle_), profile_id,
                         &raw, &handle));
  } else {
    RETURN_IF_ERROR(Call(*library_, api.device_create_gpu_instance, "nvmlDeviceCreateGpuInstance",
                         AsDevice(handle_), profile_id, &handle));
  }
  return GpuInstance(library_, handle);
}

absl::StatusOr<unsigned int> Device::MaxMigDeviceCount() const {
  unsigned int count = 0;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_max_mig_device_count,
                       "nvmlDeviceGetMaxMigDeviceCount", AsDevice(handle_), &count));
  return count;
}

absl::StatusOr<MigDevice> Device::MigDeviceByIndex(unsigned int index) const {
  abi::DeviceHandle handle = nullptr;
  RETURN_IF_ERROR(Call(*library_, library_->api().device_get_mig_device_handle_by_index,
                       "nvmlDeviceGetMigDeviceHandleByIndex", AsDevice(handle_), index, &handle));
  return MigDevice(library_, handle);
}

absl::StatusOr<std::vector<MigDevice>> Device::MigDevices() const {
  ASSIGN_OR_RETURN(unsigned int max, MaxMigDeviceCount());
  std::vector<MigDevice> out;
  for (unsigned int i = 0; i < max; ++i) {
    absl::StatusOr<MigDevice> mig = MigDeviceByIndex(i);
    if (IsNvmlError(mig.status(), ReturnCode::kNotFound)) continue;
    if (!mig.ok()) return mig.status();
    out.push_back(*mig);
  }
  return out;
}

}  // namespace dra::nvml
