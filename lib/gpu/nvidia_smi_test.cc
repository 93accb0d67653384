// RunProgram on small programs, and NvidiaSmi against the fake nvidia-smi of a mock driver root.

#include "lib/gpu/nvidia_smi.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(RunProgramTest, CapturesStdoutStderrAndExitCode) {
  auto r = RunProgram({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
}

TEST(RunProgramTest, EnvironmentIsInheritedWithOverrides) {
  ::setenv("DRA_RUN_PROGRAM_TEST_INHERITED", "kept", 1);
  auto r = RunProgram({"/bin/sh", "-c", "echo $DRA_RUN_PROGRAM_TEST_INHERITED $LD_PRELOAD_X"},
                      {.env = {{"LD_PRELOAD_X", "/lib/x.so"}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "kept /lib/x.so\n");
}

TEST(RunProgramTest, ArgumentsAreNotInterpretedByAShell) {
  auto r = RunProgram({"/bin/echo", "a;b", "$HOME", "*"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text, "a;b $HOME *\n");
}

TEST(RunProgramTest, StdinIsEmpty) {
  auto r = RunProgram({"/bin/cat"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text, "");
}

TEST(RunProgramTest, OutputBeyondTheCapKeepsTheTail) {
  auto r =
      RunProgram({"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done"},
                 {.max_output_bytes = 100});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text.size(), 100u);
  EXPECT_THAT(r->stdout_text, ::testing::EndsWith("line1999\n"));
}

TEST(RunProgramTest, TimeoutKillsTheProcessGroup) {
  dra::testing::TempDir tmp;
  const std::string marker = tmp.path() + "/child-alive";
  // The child starts a grandchild that would write the marker later; killing the group stops both.
  auto r = RunProgram({"/bin/sh", "-c", "(sleep 2; touch " + marker + ") & sleep 60"},
                      {.timeout = absl::Milliseconds(300)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/bin/sh -c"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("killed"));
  // Wait for what the grandchild would have done, by waiting on a program that outlives it.
  ASSERT_TRUE(RunProgram({"/bin/sleep", "3"}).ok());
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(RunProgramTest, SignalIsReported) {
  auto r = RunProgram({"/bin/sh", "-c", "kill -TERM $$"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->signal, SIGTERM);
}

TEST(RunProgramTest, MissingProgramAndRelativePathAreErrors) {
  auto missing = RunProgram({"/nonexistent/program"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  auto relative = RunProgram({"sh", "-c", "true"});
  EXPECT_EQ(relative.status().code(), absl::StatusCode::kInvalidArgument) << relative.status();
}

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
