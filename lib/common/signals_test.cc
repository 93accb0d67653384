#include "lib/common/signals.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "lib/common/log.h"

namespace dra {
namespace {

// Every test runs its body in a forked child, so that blocking signals and raising them never
// touches the test runner. The body returns 0 on success or the failing line.
#define CHILD_CHECK(cond)                                                           \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "child check failed at line %d: %s\n", __LINE__, #cond); \
      return __LINE__;                                                              \
    }                                                                               \
  } while (false)

// Runs `body` in a child process; returns its wait status.
int RunInChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body() & 0xff);
  int status = -1;
  ::waitpid(pid, &status, 0);
  return status;
}

testing::AssertionResult ExitedWith(int status, int code) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == code) return testing::AssertionSuccess();
  if (WIFEXITED(status)) {
    return testing::AssertionFailure() << "exit code " << WEXITSTATUS(status) << " (the child's "
                                       << "failing line modulo 256), want " << code;
  }
  if (WIFSIGNALED(status)) {
    return testing::AssertionFailure() << "killed by signal " << WTERMSIG(status);
  }
  return testing::AssertionFailure() << "wait status " << status;
}

// Records the order of callback runs and the signals they saw.
struct Recorder {
  absl::Mutex mu;
  std::vector<int> events ABSL_GUARDED_BY(mu);
  void Add(int e) {
    absl::MutexLock lock(&mu);
    events.push_back(e);
  }
  std::vector<int> Get() {
    absl::MutexLock lock(&mu);
    return events;
  }
  bool WaitForCount(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu);
    auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return events.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
};

class SignalShutdownTest : public ::testing::TestWithParam<int> {};

TEST_P(SignalShutdownTest, RunsCallbacksOnceInOrderThenNotifies) {
  const int signal = GetParam();
  int status = RunInChild([signal] {
    auto handler = SignalHandler::Start();
    CHILD_CHECK(handler.ok());
    SignalHandler& h = **handler;
    Recorder r;
    h.OnShutdown([&r](int s) { r.Add(100 + s); });
    h.OnShutdown([&r, &h](int s) {
      r.Add(200 + s);
      // Callbacks may use the handler.
      if (!h.ShutdownRequested()) r.Add(-1);
    });
    CHILD_CHECK(!h.WaitForShutdown(absl::Milliseconds(10)));
    CHILD_CHECK(!h.ShutdownRequested());
    CHILD_CHECK(::kill(::getpid(), signal) == 0);
    CHILD_CHECK(h.WaitForShutdown(absl::Seconds(30)));
    CHILD_CHECK(h.ShutdownRequested());
    CHILD_CHECK(h.shutdown_signal() == signal);
    CHILD_CHECK((r.Get() == std::vector<int>{100 + signal, 200 + signal}));
    // Registered after the fact: runs at once, here.
    h.OnShutdown([&r](int s) { r.Add(300 + s); });
    CHILD_CHECK(r.Get().size() == 3 && r.Get()[2] == 300 + signal);
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

INSTANTIATE_TEST_SUITE_P(Signals, SignalShutdownTest, ::testing::Values(SIGTERM, SIGINT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGTERM ? "SIGTERM" : "SIGINT";
                         });

TEST(SignalHandlerTest, SecondShutdownSignalExitsAtOnce) {
  int status = RunInChild([] {
    auto handler = SignalHandler::Start();
    CHILD_CHECK(handler.ok());
    // A callback that hangs: only the second signal gets the process out.
    (*handler)->OnShutdown([](int) { absl::SleepFor(absl::Hours(1)); });
    CHILD_CHECK(::kill(::getpid(), SIGTERM) == 0);
    while (!(*handler)->ShutdownRequested()) absl::SleepFor(absl::Milliseconds(1));
    CHILD_CHECK(::kill(::getpid(), SIGINT) == 0);
    absl::SleepFor(absl::Seconds(30));
    return 99;  // not reached: exit(1) from the signal thread
  });
  EXPECT_TRUE(ExitedWith(status, 1));
}

TEST(SignalHandlerTest, SecondSignalIgnoredWhenConfigured) {
  int status = RunInChild([] {
    auto handler = SignalHandler::Start({.exit_on_second_signal = false});
    CHILD_CHECK(handler.ok());
    Recorder r;
    (*handler)->OnShutdown([&r](int s) { r.Add(s); });
    (*handler)->OnUsr2([&r] { r.Add(-2); });
    CHILD_CHECK(::kill(::getpid(), SIGTERM) == 0);
    CHILD_CHECK((*handler)->WaitForShutdown(absl::Seconds(30)));
    CHILD_CHECK(::kill(::getpid(), SIGTERM) == 0);
    CHILD_CHECK(::kill(::getpid(), SIGUSR2) == 0);  // handled after the second SIGTERM
    CHILD_CHECK(r.WaitForCount(2, absl::Seconds(30)));
    CHILD_CHECK((r.Get() == std::vector<int>{SIGTERM, -2}));
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

TEST(SignalHandlerTest, Usr2CallsHandlerEachTimeWithoutShutdown) {
  int status = RunInChild([] {
    auto handler = SignalHandler::Start();
    CHILD_CHECK(handler.ok());
    Recorder r;
    // Without a handler the signal is only logged.
    Recorder logged;
    log::SetSink([&logged](std::string_view line) {
      if (line.find("\"received signal\" signal=\"SIGUSR2\" handled=false") != line.npos) {
        logged.Add(0);
      }
    });
    CHILD_CHECK(::kill(::getpid(), SIGUSR2) == 0);
    CHILD_CHECK(logged.WaitForCount(1, absl::Seconds(30)));
    (*handler)->OnUsr2([&r] { r.Add(1); });
    for (int i = 0; i < 3; ++i) {
      CHILD_CHECK(::kill(::getpid(), SIGUSR2) == 0);
      CHILD_CHECK(r.WaitForCount(i + 1, absl::Seconds(30)));
    }
    (*handler)->OnUsr2([&r] { r.Add(2); });  // replaces
    CHILD_CHECK(::kill(::getpid(), SIGUSR2) == 0);
    CHILD_CHECK(r.WaitForCount(4, absl::Seconds(30)));
    CHILD_CHECK((r.Get() == std::vector<int>{1, 1, 1, 2}));
    CHILD_CHECK(!(*handler)->ShutdownRequested());
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

TEST(SignalHandlerTest, SighupIsIgnoredByDefaultAndConfigurable) {
  int status = RunInChild([] {
    {
      auto handler = SignalHandler::Start();
      CHILD_CHECK(handler.ok());
      Recorder r;
      (*handler)->OnUsr2([&r] { r.Add(1); });
      CHILD_CHECK(::kill(::getpid(), SIGHUP) == 0);  // would kill the process if not handled
      CHILD_CHECK(::kill(::getpid(), SIGUSR2) == 0);
      CHILD_CHECK(r.WaitForCount(1, absl::Seconds(30)));
      CHILD_CHECK(!(*handler)->ShutdownRequested());
    }
    auto handler = SignalHandler::Start({.shutdown_signals = {SIGTERM, SIGHUP}});
    CHILD_CHECK(handler.ok());
    CHILD_CHECK(::kill(::getpid(), SIGHUP) == 0);
    CHILD_CHECK((*handler)->WaitForShutdown(absl::Seconds(30)));
    CHILD_CHECK((*handler)->shutdown_signal() == SIGHUP);
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

TEST(SignalHandlerTest, RequestShutdownRunsCallbacksOnCallingThread) {
  int status = RunInChild([] {
    auto handler = SignalHandler::Start();
    CHILD_CHECK(handler.ok());
    std::thread::id ran_on;
    int seen = -1;
    (*handler)->OnShutdown([&](int s) {
      ran_on = std::this_thread::get_id();
      seen = s;
    });
    (*handler)->RequestShutdown();
    CHILD_CHECK(ran_on == std::this_thread::get_id());
    CHILD_CHECK(seen == 0);
    CHILD_CHECK((*handler)->WaitForShutdown(absl::ZeroDuration()));
    CHILD_CHECK((*handler)->shutdown_signal() == 0);
    seen = -1;
    (*handler)->RequestShutdown();  // once only
    CHILD_CHECK(seen == -1);
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

TEST(SignalHandlerTest, OneInstanceAtATime) {
  int status = RunInChild([] {
    {
      auto first = SignalHandler::Start();
      CHILD_CHECK(first.ok());
      auto second = SignalHandler::Start();
      CHILD_CHECK(!second.ok());
      CHILD_CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
    }
    // Destroyed without any signal: the thread stopped; a new one may start.
    auto third = SignalHandler::Start();
    CHILD_CHECK(third.ok());
    CHILD_CHECK(!SignalHandler::Start({.shutdown_signals = {SIGKILL}}).ok());
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

TEST(SignalHandlerTest, InvalidSignalIsRejected) {
  int status = RunInChild([] {
    auto bad = SignalHandler::Start({.shutdown_signals = {SIGKILL}});
    CHILD_CHECK(!bad.ok() && bad.status().code() == absl::StatusCode::kInvalidArgument);
    CHILD_CHECK(!SignalHandler::Start({.shutdown_signals = {0}}).ok());
    CHILD_CHECK(SignalHandler::Start().ok());  // the failed starts left nothing behind
    return 0;
  });
  EXPECT_TRUE(ExitedWith(status, 0));
}

TEST(SignalHandlerTest, SigtermFromAnotherProcess) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto handler = SignalHandler::Start();
    if (!handler.ok()) ::_exit(2);
    // A thread started afterwards inherits the blocked mask.
    std::thread worker([&] { (*handler)->WaitForShutdown(); });
    if (::write(ready[1], "R", 1) != 1) ::_exit(3);
    bool done = (*handler)->WaitForShutdown(absl::Seconds(30));
    worker.join();
    ::_exit(done && (*handler)->shutdown_signal() == SIGTERM ? 0 : 4);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(ExitedWith(status, 0));
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace dra
