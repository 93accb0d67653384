#include "lib/gpuplugin/mig/mig_manager.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/inventory/dynamic_mig_devices.h"
#include "lib/nvml/errors.h"

namespace dra::gpu {
namespace {

std::string Where(const MigInfo& spec) {
  return absl::StrCat("MIG device ", spec.profile, " (profile id ", spec.gi_profile_id,
                      ", placement ", spec.placement_start, ") on GPU ", spec.parent_uuid);
}

absl::StatusOr<nvml::GpuInstanceProfile> ProfileById(const nvml::Device& gpu, unsigned int id) {
  ASSIGN_OR_RETURN(std::vector<nvml::GpuInstanceProfile> profiles, gpu.GpuInstanceProfiles());
  for (const nvml::GpuInstanceProfile& p : profiles) {
    if (p.id == id) return p;
  }
  return absl::NotFoundError(absl::StrCat("the GPU lists no GPU instance profile with id ", id));
}

// The GPU instance of `profile` at `start`, if any.
absl::StatusOr<std::optional<nvml::GpuInstance>> InstanceAt(const nvml::Device& gpu,
                                                            const nvml::GpuInstanceProfile& profile,
                                                            unsigned int start) {
  ASSIGN_OR_RETURN(std::vector<nvml::GpuInstance> instances, gpu.GpuInstances(profile));
  for (const nvml::GpuInstance& gi : instances) {
    ASSIGN_OR_RETURN(nvml::GpuInstanceInfo info, gi.Info());
    if (info.placement.start == start) return gi;
  }
  return std::nullopt;
}

// Every compute instance of `gi`, of any profile.
absl::StatusOr<std::vector<nvml::ComputeInstance>> ComputeInstancesOf(const nvml::GpuInstance& gi) {
  ASSIGN_OR_RETURN(std::vector<nvml::ComputeInstanceProfile> profiles,
                   gi.ComputeInstanceProfiles());
  std::vector<nvml::ComputeInstance> out;
  for (const nvml::ComputeInstanceProfile& p : profiles) {
    ASSIGN_OR_RETURN(std::vector<nvml::ComputeInstance> cis, gi.ComputeInstances(p));
    out.insert(out.end(), cis.begin(), cis.end());
  }
  return out;
}

// `v`, its error annotated with `context`.
template <typename T>
absl::StatusOr<T> In(absl::StatusOr<T> v, const std::string& context) {
  if (!v.ok()) return Annotate(v.status(), context);
  return v;
}

bool MigOff(const absl::Status& s) { return nvml::IsNvmlError(s, nvml::ReturnCode::kNotSupported); }

}  // namespace

absl::StatusOr<MigInfo> MigManager::Create(const MigInfo& spec) const {
  absl::MutexLock lock(&mu_);
  const std::string where = Where(spec);
  Stage("start");
  ASSIGN_OR_RETURN(nvml::Device gpu, In(session_->DeviceByUuid(spec.parent_uuid),
                                        absl::StrCat(where, ": parent GPU")));
  ASSIGN_OR_RETURN(nvml::MigModeInfo mode, In(gpu.MigMode(), absl::StrCat(where, ": MIG mode")));
  if (!mode.current_enabled) {
    ASSIGN_OR_RETURN(nvml::ReturnCode activation,
                     In(gpu.SetMigMode(true), absl::StrCat(where, ": enable MIG mode")));
    if (activation != nvml::ReturnCode::kSuccess) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": MIG mode enabled but not active (activation status ",
                       static_cast<int>(activation),
                       "): the GPU needs a reset before MIG devices can be "
                       "created on it"));
    }
    DRA_INFO("enabled MIG mode", "gpu", spec.parent_uuid);
    Stage("migMode");
  }
  ASSIGN_OR_RETURN(nvml::GpuInstanceProfile profile,
                   In(ProfileById(gpu, spec.gi_profile_id), where));
  ASSIGN_OR_RETURN(std::optional<nvml::GpuInstance> gi,
                   In(InstanceAt(gpu, profile, spec.placement_start), where));
  if (!gi) {
    ASSIGN_OR_RETURN(gi, In(gpu.CreateGpuInstance(profile.id, nvml::Placement{spec.placement_start,
                                                                              spec.placement_size}),
                            absl::StrCat(where, ": create GPU instance")));
    Stage("gpuInstance");
  }
  ASSIGN_OR_RETURN(nvml::GpuInstanceInfo gi_info, In(gi->Info(), where));
  ASSIGN_OR_RETURN(std::vector<nvml::ComputeInstance> cis, In(ComputeInstancesOf(*gi), where));
  std::optional<nvml::ComputeInstance> ci;
  if (!cis.empty()) {
    ci = cis.front();
  } else {
    // The compute instance spanning the GPU instance: the profile with the most slices.
    ASSIGN_OR_RETURN(std::vector<nvml::ComputeInstanceProfile> ci_profiles,
                     In(gi->ComputeInstanceProfiles(), where));
    const nvml::ComputeInstanceProfile* full = nullptr;
    for (const nvml::ComputeInstanceProfile& p : ci_profiles) {
      if (full == nullptr || p.slice_count > full->slice_count) full = &p;
    }
    if (full == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": the GPU instance lists no compute instance profile"));
    }
    ASSIGN_OR_RETURN(ci, In(gi->CreateComputeInstance(full->id),
                            absl::StrCat(where, ": create compute instance")));
    Stage("computeInstance");
  }
  ASSIGN_OR_RETURN(nvml::ComputeInstanceInfo ci_info, In(ci->Info(), where));
  ASSIGN_OR_RETURN(nvml::MigDevice device, In(ci->AsMigDevice(), where));
  MigInfo out = spec;
  ASSIGN_OR_RETURN(out.uuid, In(device.Uuid(), absl::StrCat(where, ": MIG UUID")));
  out.gi_id = gi_info.id;
  out.ci_id = ci_info.id;
  DRA_INFO("MIG device ready", "gpu", spec.parent_uuid, "profile", spec.profile, "placement",
           spec.placement_start, "gi", out.gi_id, "ci", out.ci_id, "uuid", out.uuid);
  return out;
}

absl::Status MigManager::Destroy(const MigInfo& spec) const {
  absl::MutexLock lock(&mu_);
  const std::string where = Where(spec);
  ASSIGN_OR_RETURN(nvml::Device gpu, In(session_->DeviceByUuid(spec.parent_uuid),
                                        absl::StrCat(where, ": parent GPU")));
  absl::StatusOr<nvml::MigModeInfo> mode = gpu.MigMode();
  if (!mode.ok()) return Annotate(mode.status(), where + ": MIG mode");
  if (!mode->current_enabled) return absl::OkStatus();  // no instance can exist
  ASSIGN_OR_RETURN(nvml::GpuInstanceProfile profile,
                   In(ProfileById(gpu, spec.gi_profile_id), where));
  absl::StatusOr<std::optional<nvml::GpuInstance>> gi =
      InstanceAt(gpu, profile, spec.placement_start);
  if (!gi.ok() && !MigOff(gi.status())) return Annotate(gi.status(), where);
  if (gi.ok() && gi->has_value()) {
    ASSIGN_OR_RETURN(std::vector<nvml::ComputeInstance> cis, In(ComputeInstancesOf(**gi), where));
    for (const nvml::ComputeInstance& ci : cis) {
      RETURN_IF_ERROR(Annotate(ci.Destroy(), where + ": destroy compute instance"));
    }
    RETURN_IF_ERROR(Annotate((*gi)->Destroy(), where + ": destroy GPU instance"));
    DRA_INFO("destroyed MIG device", "gpu", spec.parent_uuid, "profile", spec.profile, "placement",
             spec.placement_start);
  }
  return MaybeDisableMigMode(gpu, spec.parent_uuid);
}

absl::Status MigManager::MaybeDisableMigMode(const nvml::Device& gpu,
                                             const std::string& uuid) const {
  if (!MigToggleWithoutReset(gpu)) return absl::OkStatus();  // Ampere: a reset would be needed
  ASSIGN_OR_RETURN(std::vector<nvml::GpuInstance> left,
                   In(gpu.AllGpuInstances(), absl::StrCat("GPU ", uuid, ": list GPU instances")));
  if (!left.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(nvml::ReturnCode activation,
                   In(gpu.SetMigMode(false), absl::StrCat("GPU ", uuid, ": disable MIG mode")));
  DRA_INFO("disabled MIG mode: no MIG device left", "gpu", uuid, "activation",
           static_cast<int>(activation));
  return absl::OkStatus();
}

}  // namespace dra::gpu
