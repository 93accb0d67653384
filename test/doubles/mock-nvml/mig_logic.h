#pragma once

// MIG semantics of the mock, as pure functions over (GpuSpec, GpuState): placement, occupancy,
// instance id assignment, create/destroy rules and MIG mode changes. Every function returns an
// NVML return code. Callers hold the state lock.

#include <vector>

#include "test/doubles/mock-nvml/spec.h"
#include "test/doubles/mock-nvml/state.h"

namespace mock_nvml {

// Creates a GPU instance of the profile with id `profile_id`. With `placement_start` null the
// first free possible placement is taken. Errors: NOT_SUPPORTED (no MIG or MIG off),
// INVALID_ARGUMENT (unknown profile, or a start that is not a possible placement),
// INSUFFICIENT_RESOURCES (overlap or the profile's instance count is used up).
int CreateGpuInstance(const GpuSpec& spec, GpuState& state, unsigned int profile_id,
                      const unsigned int* placement_start, unsigned int* gi_id);

// Creates a compute instance of CI profile `ci_profile_id` in GPU instance `gi_id`.
int CreateComputeInstance(const GpuSpec& spec, GpuState& state, const std::string& gpu_uuid,
                          unsigned int gi_id, unsigned int ci_profile_id, unsigned int* ci_id);

// IN_USE while the GPU instance still has compute instances; INVALID_ARGUMENT if it is gone.
int DestroyGpuInstance(GpuState& state, unsigned int gi_id);
int DestroyComputeInstance(GpuState& state, unsigned int gi_id, unsigned int ci_id);

// nvmlDeviceSetMigMode. GPUs marked toggle_requires_reset (Ampere) only record the pending mode
// and report RESET_REQUIRED in `activation`; others switch at once. Disabling with instances
// present is IN_USE.
int SetMigMode(const GpuSpec& spec, GpuState& state, unsigned int mode, int* activation);

// How many more instances of the profile fit now.
unsigned int RemainingGpuInstanceCapacity(const GpuSpec& spec, const GpuState& state,
                                          const GiProfile& profile);
unsigned int RemainingComputeInstanceCapacity(const GiProfile& gi_profile, const GiState& gi,
                                              const CiProfile& ci_profile);

GiState* FindGi(GpuState& state, unsigned int gi_id);
const GiState* FindGi(const GpuState& state, unsigned int gi_id);
const CiState* FindCi(const GiState& gi, unsigned int ci_id);

// A compute instance seen as a MIG device, in MIG device index order (by GI id, then CI id).
struct MigDeviceRef {
  unsigned int gi_id = 0;
  unsigned int ci_id = 0;
};
std::vector<MigDeviceRef> ListMigDevices(const GpuState& state);

}  // namespace mock_nvml
