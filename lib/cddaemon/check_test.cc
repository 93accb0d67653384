#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cddaemon/daemon.h"
#include "lib/common/atomic_file.h"

namespace dra::cddaemon {
namespace {

using ::testing::HasSubstr;

class CheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/check-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    config_.clique_id = "cluster.1";
    config_.imexd_dir = dir_;
    config_.imex_ctl_binary = dir_ + "/ctl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A stand-in nvidia-imex-ctl: records its arguments, then runs `body`.
  void Ctl(const std::string& body) {
    ASSERT_TRUE(WriteFileAtomically(
                    config_.imex_ctl_binary,
                    absl::StrCat("#!/bin/sh\necho \"$@\" > ", dir_, "/args\n", body, "\n"), 0755)
                    .ok());
  }
  std::string dir_;
  DaemonConfig config_;
};

TEST_F(CheckTest, ReadyExactly) {
  Ctl("printf 'READY\\n'");
  EXPECT_TRUE(RunCheck(config_).ok());
  EXPECT_EQ(*ReadFile(dir_ + "/args"), absl::StrCat("-c ", dir_, "/imexd.cfg -q\n"));
}

TEST_F(CheckTest, OtherOutputFails) {
  Ctl("printf 'READY'");  // no newline
  EXPECT_FALSE(RunCheck(config_).ok());
  Ctl("printf 'READY\\nREADY\\n'");
  EXPECT_FALSE(RunCheck(config_).ok());
  Ctl("echo 'NOT READY: waiting for peers' ; exit 1");
  absl::Status s = RunCheck(config_);
  EXPECT_THAT(s.message(), HasSubstr("IMEX daemon not ready: NOT READY: waiting for peers"));
  EXPECT_THAT(s.message(), HasSubstr("exit code 1"));
}

TEST_F(CheckTest, ReadyOnStderrCounts) {
  // The Go daemon checks the combined output.
  Ctl("printf 'READY\\n' >&2");
  EXPECT_TRUE(RunCheck(config_).ok());
}

TEST_F(CheckTest, NonZeroExitWithReadyFails) {
  Ctl("printf 'READY\\n'; exit 3");
  EXPECT_FALSE(RunCheck(config_).ok());
}

TEST_F(CheckTest, HangingToolTimesOut) {
  Ctl("exec sleep 30");
  config_.check_timeout = absl::Milliseconds(300);
  absl::Time start = absl::Now();
  absl::Status s = RunCheck(config_);
  EXPECT_FALSE(s.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(CheckTest, MissingToolFails) { EXPECT_FALSE(RunCheck(config_).ok()); }

TEST_F(CheckTest, EmptyCliqueIsNoop) {
  config_.clique_id = "";
  EXPECT_TRUE(RunCheck(config_).ok());  // the tool does not even exist
}

}  // namespace
}  // namespace dra::cddaemon
