#pragma once

// MIG profile strings and canonical MIG device names (docs/compatibility.md "Device names").
//
// A profile string is what users see and select on ("1g.5gb", "1c.3g.20gb", "1g.10gb+me"); it is
// derived from the GPU instance profile *index* (NVML_GPU_INSTANCE_PROFILE_*, which fixes the
// slice count and the media-extension suffix), the compute slice count, and the instance's memory
// relative to the whole GPU, exactly as go-nvlib computes it, so that names match the Go driver's.
//
// Thread-safety: pure functions and plain values.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dra::gpu {

struct MigProfile {
  unsigned int compute_slices = 0;  // C
  unsigned int gpu_slices = 0;      // G
  unsigned int memory_gb = 0;       // GB, rounded per MigMemoryGb
  std::string suffix;               // "", "+me", "+me.all", "+gfx" or "-me"

  // "<G>g.<GB>gb<suffix>" when C == G, else "<C>c.<G>g.<GB>gb<suffix>".
  std::string String() const;
};

// The profile of a GPU instance of profile index `gi_profile_index` whose compute instance spans
// `compute_slices`, holding `mig_memory_mib` of a GPU with `device_memory_bytes` in total.
// InvalidArgument for a profile index go-nvlib does not know (0x11 and above, e.g. 3_SLICE_GFX)
// or a zero compute slice count or device memory.
absl::StatusOr<MigProfile> MakeMigProfile(unsigned int gi_profile_index,
                                          unsigned int compute_slices, uint64_t mig_memory_mib,
                                          uint64_t device_memory_bytes);

// The "<GB>" of a profile string: the instance's share of the GPU's memory rounded up to eighths,
// times the GPU's memory in whole GiB (rounded up), rounded to the nearest integer. For an A100
// 40GB (40960 MiB): 4864 MiB -> 5, 9856 MiB -> 10, 19968 MiB -> 20.
// REQUIRES: device_memory_bytes > 0.
unsigned int MigMemoryGb(uint64_t mig_memory_mib, uint64_t device_memory_bytes);

// Kubernetes' RFC 1123 clean-up as the Go driver applies it: lower-case, every character outside
// [a-z0-9-.] becomes '-', leading and trailing '-' trimmed, one trailing '.' trimmed, then at most
// 253 characters.
std::string SanitizeRfc1123(std::string_view name);

// The profile as it appears inside a device name: dots removed, then SanitizeRfc1123.
// "1g.5gb" -> "1g5gb", "1g.10gb+me" -> "1g10gb-me", "1g.10gb+me.all" -> "1g10gb-meall".
std::string MigProfileNameComponent(std::string_view profile);

}  // namespace dra::gpu
