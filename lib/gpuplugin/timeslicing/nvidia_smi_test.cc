// NvidiaSmi against the fake nvidia-smi of a mock driver root (RunProgram: lib/common).

#include "lib/gpuplugin/timeslicing/nvidia_smi.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class NvidiaSmiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_path_ = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", root_path_).ok());
    auto root = driverroot::DriverRoot::Create({.root = root_path_});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
  }
  dra::testing::TempDir tmp_;
  std::string root_path_;
  std::unique_ptr<driverroot::DriverRoot> root_;
};

TEST_F(NvidiaSmiTest, RunsTheDriverRootsBinaryWithItsLibrary) {
  NvidiaSmi smi(root_.get());
  auto out = smi.Run({"-L"});
  ASSERT_TRUE(out.ok()) << out.status();
  // Eight GPUs: the mock library of this root (LD_PRELOAD) with its /dev.
  EXPECT_EQ(std::count(out->begin(), out->end(), '\n'), 8) << *out;
  EXPECT_THAT(*out, StartsWith("GPU 0: NVIDIA H100"));
}

TEST_F(NvidiaSmiTest, FailureNamesCommandExitCodeAndOutput) {
  NvidiaSmi smi(root_.get());
  auto out = smi.Run({"-i", "GPU-00000000-0000-0000-0000-000000000000", "-c", "DEFAULT"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal) << out.status();
  const std::string msg(out.status().message());
  EXPECT_THAT(msg, HasSubstr(root_path_ + "/usr/bin/nvidia-smi -i "
                                          "GPU-00000000-0000-0000-0000-000000000000 -c DEFAULT"));
  EXPECT_THAT(msg, HasSubstr("failed with exit code 6"));
  EXPECT_THAT(msg, HasSubstr("No devices were found"));
}

TEST_F(NvidiaSmiTest, StderrTailIsPreferred) {
  NvidiaSmi smi(root_.get());
  auto out = smi.Run({"compute-policy", "-i", "0", "--set-timeslice", "9"});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("failed with exit code 2: Invalid timeslice value: 9 (allowed: 0..3)"));
}

TEST_F(NvidiaSmiTest, MissingBinaryIsNotFound) {
  std::filesystem::remove(root_path_ + "/usr/bin/nvidia-smi");
  NvidiaSmi smi(root_.get());
  auto out = smi.Run({"-L"});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("find nvidia-smi in the driver root"));
}

}  // namespace
}  // namespace dra::gpu
