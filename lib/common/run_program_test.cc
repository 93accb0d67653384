// RunProgram: captured output and exit status, environment, no shell, empty stdin, the output
// cap, the time limit that kills the process group, signals and bad argv.

#include "lib/common/run_program.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra {
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
  const std::string marker =
      absl::StrCat(::testing::TempDir(), "run_program_child_alive_", ::getpid());
  std::filesystem::remove(marker);
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

}  // namespace
}  // namespace dra
