// Clique ID aggregation over per-GPU fabric info (clique_id.h), and discovery through the mock
// NVML of a gb200-4x root.

#include "lib/cdplugin/clique_id.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/nvml/errors.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::cdplugin {
namespace {

using ::testing::HasSubstr;

nvml::FabricInfo Fabric(uint8_t uuid_byte, uint32_t clique,
                        nvml::FabricState state = nvml::FabricState::kCompleted, int status = 0) {
  nvml::FabricInfo f;
  f.cluster_uuid.fill(uuid_byte);
  f.clique_id = clique;
  f.state = state;
  f.status = status;
  return f;
}

absl::Status NotSupported() {
  return nvml::MakeNvmlError(nvml::ReturnCode::kNotSupported, "nvmlDeviceGetGpuFabricInfo",
                             "Not Supported");
}

TEST(CliqueIdTest, AllGpusAgree) {
  auto id = CliqueIdFromFabric({{"GPU-a", Fabric(0x11, 7)}, {"GPU-b", Fabric(0x11, 7)}}, true);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "11111111-1111-1111-1111-111111111111.7");
}

TEST(CliqueIdTest, NoFabricGivesEmpty) {
  EXPECT_EQ(*CliqueIdFromFabric({}, true), "");
  EXPECT_EQ(*CliqueIdFromFabric({{"GPU-a", NotSupported()}}, true), "");
  EXPECT_EQ(
      *CliqueIdFromFabric({{"GPU-a", Fabric(0x11, 7, nvml::FabricState::kNotSupported)}}, true),
      "");
  // NVLink without a multi-node fabric: all-zero cluster UUID.
  EXPECT_EQ(*CliqueIdFromFabric({{"GPU-a", Fabric(0, 0)}}, true), "");
}

TEST(CliqueIdTest, SkippedGpusDoNotCount) {
  auto id = CliqueIdFromFabric({{"GPU-a", NotSupported()}, {"GPU-b", Fabric(0x22, 3)}}, true);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "22222222-2222-2222-2222-222222222222.3");
}

TEST(CliqueIdTest, MixedCliquesAreAnError) {
  auto id = CliqueIdFromFabric({{"GPU-a", Fabric(0x11, 7)}, {"GPU-b", Fabric(0x11, 8)}}, true);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("unexpected number of unique"));
  EXPECT_THAT(id.status().message(), HasSubstr("7 (GPU-a)"));
  EXPECT_THAT(id.status().message(), HasSubstr("8 (GPU-b)"));
  // Lenient mode does not forgive it either.
  EXPECT_FALSE(
      CliqueIdFromFabric({{"GPU-a", Fabric(0x11, 7)}, {"GPU-b", Fabric(0x12, 7)}}, false).ok());
}

TEST(CliqueIdTest, StrictFabricErrors) {
  auto in_progress = CliqueIdFromFabric(
      {{"GPU-a", Fabric(0x11, 7, nvml::FabricState::kInProgress)}}, /*strict=*/true);
  ASSERT_FALSE(in_progress.ok());
  EXPECT_THAT(in_progress.status().message(), HasSubstr("NVLink fabric not attached"));
  EXPECT_THAT(in_progress.status().message(), HasSubstr("GPU-a"));
  auto registration = CliqueIdFromFabric(
      {{"GPU-a", Fabric(0x11, 7, nvml::FabricState::kCompleted, 5)}}, /*strict=*/true);
  ASSERT_FALSE(registration.ok());
  EXPECT_THAT(registration.status().message(), HasSubstr("registration error"));
  auto query = CliqueIdFromFabric(
      {{"GPU-a", nvml::MakeNvmlError(nvml::ReturnCode::kUnknown, "nvmlDeviceGetGpuFabricInfo",
                                     "Unknown Error")}},
      true);
  EXPECT_FALSE(query.ok());
}

TEST(CliqueIdTest, LenientModeSkipsUnattachedGpus) {
  auto id = CliqueIdFromFabric(
      {{"GPU-a", Fabric(0x11, 7, nvml::FabricState::kInProgress)}, {"GPU-b", Fabric(0x11, 7)}},
      /*strict=*/false);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "11111111-1111-1111-1111-111111111111.7");
}

TEST(CliqueIdTest, DiscoveredThroughNvml) {
  dra::testing::TempDir dir;
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("gb200-4x", dir.path()).ok());
  auto nvml = nvml::Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  auto id = DiscoverCliqueId(**nvml, true);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "dd6ffbfa-8abc-4492-a855-efc01b31186c.7");

  dra::testing::TempDir plain;
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", plain.path()).ok());
  auto plain_nvml = nvml::Nvml::Create(plain.path());
  ASSERT_TRUE(plain_nvml.ok());
  EXPECT_EQ(*DiscoverCliqueId(**plain_nvml, true), "");
}

// make-driver-root.sh --clique-id / --cluster-uuid reach NVML.
TEST(CliqueIdTest, PatchedRootsAreInOtherCliques) {
  dra::testing::TempDir dir;
  auto made = dra::testing::RunCommand(
      {dra::testing::MakeDriverRootScript(), "--lib", dra::testing::MockNvmlLibraryPath(), "--smi",
       dra::testing::FakeNvidiaSmiPath(), "--clique-id", "9", "--cluster-uuid",
       "01234567-89ab-cdef-0123-456789abcdef", "gb200-4x", dir.path()});
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->exit_code, 0) << made->output;
  auto nvml = nvml::Nvml::Create(dir.path());
  ASSERT_TRUE(nvml.ok());
  EXPECT_EQ(*DiscoverCliqueId(**nvml, true), "01234567-89ab-cdef-0123-456789abcdef.9");
}

}  // namespace
}  // namespace dra::cdplugin
