// Profile strings, the GB rounding, RFC 1123 sanitizing and canonical MIG device names, against
// the examples of docs/compatibility.md "Device names" and the profile tables of the shipped mock
// profiles.

#include "lib/gpuplugin/migprofiles/mig_profile.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/gpuplugin/inventory/inventory.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = uint64_t{1} << 20;

struct ProfileCase {
  unsigned int gi_profile_index;
  unsigned int compute_slices;
  uint64_t mig_memory_mib;
  uint64_t device_memory_mib;
  std::string want;
};

TEST(MigProfileTest, ProfileStrings) {
  const ProfileCase cases[] = {
      // A100-SXM4-40GB (40960 MiB)
      {0x0, 1, 4864, 40960, "1g.5gb"},
      {0x1, 2, 9856, 40960, "2g.10gb"},
      {0x2, 3, 19968, 40960, "3g.20gb"},
      {0x3, 4, 19968, 40960, "4g.20gb"},
      {0x4, 7, 40192, 40960, "7g.40gb"},
      {0x7, 1, 4864, 40960, "1g.5gb+me"},
      {0x9, 1, 9856, 40960, "1g.10gb"},
      {0x2, 1, 19968, 40960, "1c.3g.20gb"},  // a compute instance smaller than its GPU instance
      // H100 80GB HBM3 (81559 MiB, 80 GiB rounded up)
      {0x0, 1, 9984, 81559, "1g.10gb"},
      {0x1, 2, 20096, 81559, "2g.20gb"},
      {0x2, 3, 40448, 81559, "3g.40gb"},
      {0x9, 1, 20096, 81559, "1g.20gb"},
      {0x7, 1, 9984, 81559, "1g.10gb+me"},
      {0x8, 2, 20096, 81559, "2g.20gb+me"},
      {0xA, 1, 9984, 81559, "1g.10gb+gfx"},
      {0xB, 2, 20096, 81559, "2g.20gb+gfx"},
      {0xC, 4, 40448, 81559, "4g.40gb+gfx"},
      {0xD, 1, 9984, 81559, "1g.10gb-me"},
      {0xE, 2, 20096, 81559, "2g.20gb-me"},
      {0xF, 1, 9984, 81559, "1g.10gb+me.all"},
      {0x10, 2, 20096, 81559, "2g.20gb+me.all"},
      // GB200 (189471 MiB): 2g rounds 46.5 up, as Go's math.Round does
      {0x0, 1, 23552, 189471, "1g.23gb"},
      {0x1, 2, 46848, 189471, "2g.47gb"},
      {0x2, 3, 94208, 189471, "3g.93gb"},
      {0x4, 7, 187904, 189471, "7g.186gb"},
      {0x5, 8, 187904, 189471, "8g.186gb"},
      {0x6, 6, 141312, 189471, "6g.140gb"},
  };
  for (const ProfileCase& c : cases) {
    absl::StatusOr<MigProfile> profile = MakeMigProfile(
        c.gi_profile_index, c.compute_slices, c.mig_memory_mib, c.device_memory_mib * kMiB);
    ASSERT_TRUE(profile.ok()) << profile.status();
    EXPECT_EQ(profile->String(), c.want) << "index " << c.gi_profile_index;
  }
}

TEST(MigProfileTest, UnknownProfileIndexIsAnError) {
  // 0x11 is 3_SLICE_GFX on newer drivers; go-nvlib does not know it.
  absl::StatusOr<MigProfile> profile = MakeMigProfile(0x11, 3, 19968, 40960 * kMiB);
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(profile.status().message(), HasSubstr("unknown GPU instance profile index 17"));
  EXPECT_FALSE(MakeMigProfile(0x0, 0, 4864, 40960 * kMiB).ok());
  EXPECT_FALSE(MakeMigProfile(0x0, 1, 4864, 0).ok());
}

TEST(MigProfileTest, MemoryGb) {
  EXPECT_EQ(MigMemoryGb(4864, 40960 * kMiB), 5u);
  EXPECT_EQ(MigMemoryGb(40192, 40960 * kMiB), 40u);
  EXPECT_EQ(MigMemoryGb(9984, 81559 * kMiB), 10u);
  EXPECT_EQ(MigMemoryGb(46848, 189471 * kMiB), 47u);
  EXPECT_EQ(MigMemoryGb(0, 40960 * kMiB), 0u);
}

TEST(MigProfileTest, SanitizeRfc1123) {
  const std::pair<std::string, std::string> cases[] = {
      {"1g10gb+me", "1g10gb-me"},
      {"1G10GB", "1g10gb"},
      {"a_b c", "a-b-c"},
      {"--a--", "a"},
      {"a.", "a"},
      {"a-.", "a-"},  // '-' is trimmed before the trailing '.'
      {"+++", ""},
      {"", ""},
      {"x.y", "x.y"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(SanitizeRfc1123(in), want) << in;
  EXPECT_EQ(SanitizeRfc1123(std::string(300, 'a')).size(), 253u);
}

TEST(MigProfileTest, NameComponent) {
  const std::pair<std::string, std::string> cases[] = {
      {"1g.5gb", "1g5gb"},
      {"1g.10gb+me", "1g10gb-me"},
      {"1g.10gb+me.all", "1g10gb-meall"},
      {"1g.10gb+gfx", "1g10gb-gfx"},
      {"1g.10gb-me", "1g10gb-me"},
      {"1c.3g.20gb", "1c3g20gb"},
      {"7g.186gb", "7g186gb"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(MigProfileNameComponent(in), want) << in;
}

TEST(MigProfileTest, CanonicalNames) {
  EXPECT_EQ(MigDeviceName(0, "1g.5gb", 19, 0), "gpu-0-mig-1g5gb-19-0");
  EXPECT_EQ(MigDeviceName(0, "1g.12gb", 19, 0), "gpu-0-mig-1g12gb-19-0");
  EXPECT_EQ(MigDeviceName(1, "2g.47gb", 14, 0), "gpu-1-mig-2g47gb-14-0");
  EXPECT_EQ(MigDeviceName(3, "1g.10gb+me", 20, 6), "gpu-3-mig-1g10gb-me-20-6");
  EXPECT_EQ(MigDeviceName(12, "1g.10gb+me.all", 30, 2), "gpu-12-mig-1g10gb-meall-30-2");
}

}  // namespace
}  // namespace dra::gpu
