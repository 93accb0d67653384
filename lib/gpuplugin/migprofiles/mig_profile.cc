#include "lib/gpuplugin/migprofiles/mig_profile.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dra::gpu {
namespace {

// What a GPU instance profile index (NVML_GPU_INSTANCE_PROFILE_*) means for the profile string:
// its memory-slice count and its suffix. Indexes are positions in this table (0x0 .. 0x10).
struct GiProfileIndexInfo {
  unsigned int slices;
  const char* suffix;
};

constexpr GiProfileIndexInfo kGiProfileIndexes[] = {
    {1, ""},         // 0x0 1_SLICE
    {2, ""},         // 0x1 2_SLICE
    {3, ""},         // 0x2 3_SLICE
    {4, ""},         // 0x3 4_SLICE
    {7, ""},         // 0x4 7_SLICE
    {8, ""},         // 0x5 8_SLICE
    {6, ""},         // 0x6 6_SLICE
    {1, "+me"},      // 0x7 1_SLICE_REV1 (media extensions)
    {2, "+me"},      // 0x8 2_SLICE_REV1
    {1, ""},         // 0x9 1_SLICE_REV2 (double memory; the GB says so)
    {1, "+gfx"},     // 0xA 1_SLICE_GFX
    {2, "+gfx"},     // 0xB 2_SLICE_GFX
    {4, "+gfx"},     // 0xC 4_SLICE_GFX
    {1, "-me"},      // 0xD 1_SLICE_NO_ME
    {2, "-me"},      // 0xE 2_SLICE_NO_ME
    {1, "+me.all"},  // 0xF 1_SLICE_ALL_ME
    {2, "+me.all"},  // 0x10 2_SLICE_ALL_ME
};

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

}  // namespace

std::string MigProfile::String() const {
  if (compute_slices == gpu_slices) {
    return absl::StrCat(gpu_slices, "g.", memory_gb, "gb", suffix);
  }
  return absl::StrCat(compute_slices, "c.", gpu_slices, "g.", memory_gb, "gb", suffix);
}

unsigned int MigMemoryGb(uint64_t mig_memory_mib, uint64_t device_memory_bytes) {
  // Floating point on purpose: go-nvlib computes it so, and the rounding must agree with it.
  double fraction = static_cast<double>(mig_memory_mib) * static_cast<double>(kMiB) /
                    static_cast<double>(device_memory_bytes);
  fraction = std::ceil(fraction * 8) / 8;
  const uint64_t device_gib = (device_memory_bytes + kGiB - 1) / kGiB;  // rounded up
  return static_cast<unsigned int>(std::round(fraction * static_cast<double>(device_gib)));
}

absl::StatusOr<MigProfile> MakeMigProfile(unsigned int gi_profile_index,
                                          unsigned int compute_slices, uint64_t mig_memory_mib,
                                          uint64_t device_memory_bytes) {
  if (gi_profile_index >= std::size(kGiProfileIndexes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown GPU instance profile index ", gi_profile_index));
  }
  if (compute_slices == 0) {
    return absl::InvalidArgumentError("compute instance spans no slices");
  }
  if (device_memory_bytes == 0) {
    return absl::InvalidArgumentError("GPU memory size unknown");
  }
  const GiProfileIndexInfo& info = kGiProfileIndexes[gi_profile_index];
  MigProfile profile;
  profile.compute_slices = compute_slices;
  profile.gpu_slices = info.slices;
  profile.memory_gb = MigMemoryGb(mig_memory_mib, device_memory_bytes);
  profile.suffix = info.suffix;
  return profile;
}

std::string SanitizeRfc1123(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    out += ok ? c : '-';
  }
  const size_t first = out.find_first_not_of('-');
  if (first == std::string::npos) return "";
  out.erase(0, first);
  out.erase(out.find_last_not_of('-') + 1);
  if (!out.empty() && out.back() == '.') out.pop_back();
  if (out.size() > 253) out.resize(253);
  return out;
}

std::string MigProfileNameComponent(std::string_view profile) {
  std::string without_dots;
  without_dots.reserve(profile.size());
  for (char c : profile) {
    if (c != '.') without_dots += c;
  }
  return SanitizeRfc1123(without_dots);
}

}  // namespace dra::gpu
