#include "lib/cddaemon/imex_process.h"

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cddaemon {
namespace {

bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(10)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return cond();
}

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

TEST(RestartDelayTest, FirstImmediateThenDoublingCapped) {
  absl::Duration first = absl::Milliseconds(500), cap = absl::Seconds(10);
  EXPECT_EQ(RestartDelay(1, first, cap), absl::ZeroDuration());
  EXPECT_EQ(RestartDelay(2, first, cap), absl::Milliseconds(500));
  EXPECT_EQ(RestartDelay(3, first, cap), absl::Seconds(1));
  EXPECT_EQ(RestartDelay(4, first, cap), absl::Seconds(2));
  EXPECT_EQ(RestartDelay(7, first, cap), absl::Seconds(10));
  EXPECT_EQ(RestartDelay(100, first, cap), absl::Seconds(10));
}

TEST(ImexProcessTest, StartsOnceAndSignals) {
  ImexProcess p({.argv = {"sleep", "100"}});
  bool fresh = false;
  ASSERT_TRUE(p.EnsureStarted(&fresh).ok());
  EXPECT_TRUE(fresh);
  pid_t pid = p.pid();
  ASSERT_TRUE(p.EnsureStarted(&fresh).ok());
  EXPECT_FALSE(fresh);
  EXPECT_EQ(p.pid(), pid);
  EXPECT_TRUE(p.Signal(0).ok());
  p.Stop();
  EXPECT_FALSE(p.running());
  EXPECT_FALSE(p.Signal(SIGUSR1).ok());
}

TEST(ImexProcessTest, MissingProgramIsAnError) {
  ImexProcess p({.argv = {"/nonexistent/nvidia-imex", "-c", "x"}});
  bool fresh = false;
  absl::Status s = p.EnsureStarted(&fresh);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_FALSE(fresh);
}

TEST(ImexProcessTest, RestartsAfterUnexpectedExitWithBackoff) {
  ImexProcess p({.argv = {"sleep", "100"},
                 .first_backoff = absl::Milliseconds(300),
                 .poll_interval = absl::Milliseconds(20)});
  bool fresh = false;
  ASSERT_TRUE(p.EnsureStarted(&fresh).ok());
  pid_t first = p.pid();
  ::kill(first, SIGKILL);
  // The first restart is immediate (within a few polls).
  ASSERT_TRUE(WaitFor([&] { return p.running() && p.pid() != first; }, absl::Seconds(2)));
  EXPECT_EQ(p.restarts(), 1);
  pid_t second = p.pid();
  absl::Time killed = absl::Now();
  ::kill(second, SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return p.running() && p.pid() != second; }));
  EXPECT_GE(absl::Now() - killed, absl::Milliseconds(250)) << "second restart must back off";
  EXPECT_EQ(p.restarts(), 2);
  p.Stop();
}

TEST(ImexProcessTest, StopSendsSigkillAfterTimeout) {
  // A child that ignores SIGTERM (the trap is inherited by sh's loop, not by each short sleep).
  ImexProcess p({.argv = {"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"},
                 .stop_timeout = absl::Milliseconds(300)});
  bool fresh = false;
  ASSERT_TRUE(p.EnsureStarted(&fresh).ok());
  pid_t pid = p.pid();
  absl::SleepFor(absl::Milliseconds(100));  // let sh install the trap
  absl::Time start = absl::Now();
  p.Stop();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_FALSE(Alive(pid));
}

TEST(ImexProcessTest, ChildDoesNotInheritBlockedSignals) {
  // The daemon blocks SIGTERM in all threads; the child must still die of SIGTERM promptly.
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  ImexProcess p({.argv = {"sleep", "100"}, .stop_timeout = absl::Seconds(20)});
  bool fresh = false;
  ASSERT_TRUE(p.EnsureStarted(&fresh).ok());
  absl::Time start = absl::Now();
  p.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST(FindProgramTest, PathLookupAndExplicitPaths) {
  absl::StatusOr<std::string> sh = FindProgram("sh");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_TRUE(absl::EndsWith(*sh, "/sh"));
  EXPECT_EQ(*FindProgram("/bin/sh"), "/bin/sh");
  absl::StatusOr<std::string> missing = FindProgram("no-such-nvidia-imex");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(std::string(missing.status().message()),
              ::testing::HasSubstr("no-such-nvidia-imex not found in PATH"));
  EXPECT_FALSE(FindProgram("/nonexistent/nvidia-imex").ok());
}

}  // namespace
}  // namespace dra::cddaemon
