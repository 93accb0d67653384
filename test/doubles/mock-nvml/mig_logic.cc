#include "test/doubles/mock-nvml/mig_logic.h"

#include <algorithm>
#include <string>

#include "lib/nvml/nvml_abi.h"
#include "test/doubles/mock-nvml/uuid.h"

namespace mock_nvml {
namespace {

namespace abi = dra::nvml::abi;

bool Overlaps(unsigned int a_start, unsigned int a_size, unsigned int b_start,
              unsigned int b_size) {
  return a_start < b_start + b_size && b_start < a_start + a_size;
}

bool MemoryRangeFree(const GpuState& state, unsigned int start, unsigned int size) {
  for (const GiState& gi : state.gis) {
    if (Overlaps(start, size, gi.start, gi.size)) return false;
  }
  return true;
}

unsigned int CountOfProfile(const GpuState& state, unsigned int profile_index) {
  return static_cast<unsigned int>(
      std::count_if(state.gis.begin(), state.gis.end(),
                    [&](const GiState& gi) { return gi.profile_index == profile_index; }));
}

// A GPU instance that spans the whole GPU gets id 0, as on real GPUs; others the lowest free id
// from 1.
unsigned int NextGiId(const GpuSpec& spec, const GpuState& state, const GiProfile& profile) {
  if (profile.slices >= spec.mig_table->compute_slices && FindGi(state, 0) == nullptr) return 0;
  unsigned int id = 1;
  while (FindGi(state, id) != nullptr) ++id;
  return id;
}

// The first start (a multiple of the CI size) whose compute slices are all free, or -1.
int FreeCiStart(const GiProfile& gi_profile, const GiState& gi, const CiProfile& ci_profile) {
  for (unsigned int start = 0; start + ci_profile.slices <= gi_profile.slices;
       start += ci_profile.slices) {
    bool free = true;
    for (const CiState& ci : gi.cis) {
      if (Overlaps(start, ci_profile.slices, ci.start, ci.size)) free = false;
    }
    if (free) return static_cast<int>(start);
  }
  return -1;
}

}  // namespace

GiState* FindGi(GpuState& state, unsigned int gi_id) {
  for (GiState& gi : state.gis) {
    if (gi.id == gi_id) return &gi;
  }
  return nullptr;
}

const GiState* FindGi(const GpuState& state, unsigned int gi_id) {
  for (const GiState& gi : state.gis) {
    if (gi.id == gi_id) return &gi;
  }
  return nullptr;
}

const CiState* FindCi(const GiState& gi, unsigned int ci_id) {
  for (const CiState& ci : gi.cis) {
    if (ci.id == ci_id) return &ci;
  }
  return nullptr;
}

unsigned int RemainingGpuInstanceCapacity(const GpuSpec& spec, const GpuState& state,
                                          const GiProfile& profile) {
  // Greedy count of free placements, the way `nvidia-smi mig -lgip` shows "Free/Total".
  GpuState scratch = state;
  unsigned int n = 0;
  for (unsigned int start : profile.placement_starts) {
    if (CountOfProfile(scratch, profile.index) >= profile.instance_count) break;
    if (MemoryRangeFree(scratch, start, profile.placement_size)) {
      scratch.gis.push_back({1000 + n, profile.index, start, profile.placement_size, {}});
      ++n;
    }
  }
  return n;
}

unsigned int RemainingComputeInstanceCapacity(const GiProfile& gi_profile, const GiState& gi,
                                              const CiProfile& ci_profile) {
  GiState scratch = gi;
  unsigned int n = 0;
  for (int start = FreeCiStart(gi_profile, scratch, ci_profile); start >= 0;
       start = FreeCiStart(gi_profile, scratch, ci_profile)) {
    scratch.cis.push_back(
        {1000 + n, ci_profile.index, static_cast<unsigned int>(start), ci_profile.slices, ""});
    ++n;
  }
  return n;
}

int CreateGpuInstance(const GpuSpec& spec, GpuState& state, unsigned int profile_id,
                      const unsigned int* placement_start, unsigned int* gi_id) {
  if (!spec.mig_table || state.mig_current != abi::kDeviceMigEnable) {
    return abi::kErrorNotSupported;
  }
  const GiProfile* profile = FindGiProfileById(spec, profile_id);
  if (profile == nullptr) return abi::kErrorInvalidArgument;
  if (CountOfProfile(state, profile->index) >= profile->instance_count) {
    return abi::kErrorInsufficientResources;
  }
  int chosen = -1;
  if (placement_start != nullptr) {
    const auto& starts = profile->placement_starts;
    if (std::find(starts.begin(), starts.end(), *placement_start) == starts.end()) {
      return abi::kErrorInvalidArgument;
    }
    if (!MemoryRangeFree(state, *placement_start, profile->placement_size)) {
      return abi::kErrorInsufficientResources;
    }
    chosen = static_cast<int>(*placement_start);
  } else {
    for (unsigned int start : profile->placement_starts) {
      if (MemoryRangeFree(state, start, profile->placement_size)) {
        chosen = static_cast<int>(start);
        break;
      }
    }
    if (chosen < 0) return abi::kErrorInsufficientResources;
  }
  GiState gi;
  gi.id = NextGiId(spec, state, *profile);
  gi.profile_index = profile->index;
  gi.start = static_cast<unsigned int>(chosen);
  gi.size = profile->placement_size;
  state.gis.push_back(gi);
  std::sort(state.gis.begin(), state.gis.end(),
            [](const GiState& a, const GiState& b) { return a.id < b.id; });
  *gi_id = gi.id;
  return abi::kSuccess;
}

int CreateComputeInstance(const GpuSpec& spec, GpuState& state, const std::string& gpu_uuid,
                          unsigned int gi_id, unsigned int ci_profile_id, unsigned int* ci_id) {
  if (!spec.mig_table || state.mig_current != abi::kDeviceMigEnable) {
    return abi::kErrorNotSupported;
  }
  GiState* gi = FindGi(state, gi_id);
  if (gi == nullptr) return abi::kErrorInvalidArgument;
  const GiProfile* gi_profile = FindGiProfileByIndex(spec, gi->profile_index);
  const CiProfile* ci_profile = gi_profile ? FindCiProfile(*gi_profile, ci_profile_id) : nullptr;
  if (ci_profile == nullptr) return abi::kErrorInvalidArgument;
  const int start = FreeCiStart(*gi_profile, *gi, *ci_profile);
  if (start < 0) return abi::kErrorInsufficientResources;
  CiState ci;
  ci.id = 0;
  while (FindCi(*gi, ci.id) != nullptr) ++ci.id;
  ci.profile_index = ci_profile->index;
  ci.start = static_cast<unsigned int>(start);
  ci.size = ci_profile->slices;
  // A fresh UUID per creation, as real drivers do: recreating the same GI/CI ids gives a new one.
  ci.uuid = MakeUuid("MIG-", gpu_uuid + "/gi" + std::to_string(gi->id) + "/ci" +
                                 std::to_string(ci.id) + "/" + std::to_string(state.creations++));
  gi->cis.push_back(ci);
  std::sort(gi->cis.begin(), gi->cis.end(),
            [](const CiState& a, const CiState& b) { return a.id < b.id; });
  *ci_id = ci.id;
  return abi::kSuccess;
}

int DestroyGpuInstance(GpuState& state, unsigned int gi_id) {
  GiState* gi = FindGi(state, gi_id);
  if (gi == nullptr) return abi::kErrorInvalidArgument;
  if (!gi->cis.empty()) return abi::kErrorInUse;
  state.gis.erase(state.gis.begin() + (gi - state.gis.data()));
  return abi::kSuccess;
}

int DestroyComputeInstance(GpuState& state, unsigned int gi_id, unsigned int ci_id) {
  GiState* gi = FindGi(state, gi_id);
  if (gi == nullptr) return abi::kErrorInvalidArgument;
  for (auto it = gi->cis.begin(); it != gi->cis.end(); ++it) {
    if (it->id == ci_id) {
      gi->cis.erase(it);
      return abi::kSuccess;
    }
  }
  return abi::kErrorInvalidArgument;
}

int SetMigMode(const GpuSpec& spec, GpuState& state, unsigned int mode, int* activation) {
  if (!spec.mig_table) return abi::kErrorNotSupported;
  if (mode != abi::kDeviceMigEnable && mode != abi::kDeviceMigDisable) {
    return abi::kErrorInvalidArgument;
  }
  if (mode == abi::kDeviceMigDisable && !state.gis.empty()) return abi::kErrorInUse;
  state.mig_pending = mode;
  if (mode != state.mig_current && spec.mig_toggle_requires_reset) {
    *activation = abi::kErrorResetRequired;
    return abi::kSuccess;
  }
  state.mig_current = mode;
  *activation = abi::kSuccess;
  return abi::kSuccess;
}

std::vector<MigDeviceRef> ListMigDevices(const GpuState& state) {
  std::vector<MigDeviceRef> out;
  if (state.mig_current != abi::kDeviceMigEnable) return out;
  for (const GiState& gi : state.gis) {
    for (const CiState& ci : gi.cis) out.push_back({gi.id, ci.id});
  }
  return out;
}

}  // namespace mock_nvml
