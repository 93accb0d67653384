#include "lib/cddaemon/sync_loop.h"

#include <atomic>
#include <functional>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "lib/k8s/errors.h"

namespace dra::cddaemon {
namespace {

bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(5)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return cond();
}

absl::Status Conflict() { return k8s::StatusFromHttp(409, "", "", "PUT /apis/x"); }

TEST(SyncLoopTest, RetriesUntilSuccessRereadingAfterFailure) {
  std::atomic<int> calls{0};
  std::atomic<bool> saw_reread{false};
  SyncLoop loop("x", {.initial = absl::Milliseconds(1), .max = absl::Milliseconds(5)},
                [&](bool reread) {
                  if (reread) saw_reread = true;
                  return ++calls < 3 ? absl::UnavailableError("down") : absl::OkStatus();
                });
  loop.Start();
  ASSERT_TRUE(WaitFor([&] { return loop.syncs() == 1; }));
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(saw_reread);
  loop.Wake();
  ASSERT_TRUE(WaitFor([&] { return loop.syncs() == 2; }));
  loop.Stop();
}

TEST(SyncLoopTest, WakesCoalesce) {
  std::atomic<int> calls{0};
  absl::Notification release;
  SyncLoop loop("x", kWriteBackoff, [&](bool) {
    ++calls;
    release.WaitForNotification();
    return absl::OkStatus();
  });
  loop.Start();
  ASSERT_TRUE(WaitFor([&] { return calls == 1; }));
  for (int i = 0; i < 100; ++i) loop.Wake();  // while the first sync runs
  release.Notify();
  ASSERT_TRUE(WaitFor([&] { return loop.syncs() == 2; }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(calls, 2) << "a hundred wakes during one sync make one more sync";
  loop.Stop();
}

TEST(SyncLoopTest, ConflictWaitsTheBackoffButOtherErrorsWakeEarly) {
  // A conflict, a timeout and a 429 wait the whole delay; no free index does not.
  const absl::Status too_many = k8s::StatusFromHttp(
      429, R"({"kind":"Status","reason":"TooManyRequests","message":"slow down"})", "", "patch x");
  for (const absl::Status& failure :
       {Conflict(), absl::DeadlineExceededError("timed out after 30s waiting for the response"),
        too_many, absl::ResourceExhaustedError("no available indices")}) {
    const bool conflict = !absl::IsResourceExhausted(failure) || failure == too_many;
    std::atomic<int> calls{0};
    SyncLoop loop("x", {.initial = absl::Milliseconds(800), .max = absl::Seconds(2), .jitter = 0},
                  [&](bool) { return ++calls == 1 ? failure : absl::OkStatus(); });
    absl::Time start = absl::Now();
    loop.Start();
    ASSERT_TRUE(WaitFor([&] { return calls == 1; }));
    absl::SleepFor(absl::Milliseconds(50));
    loop.Wake();  // e.g. the clique changed
    ASSERT_TRUE(WaitFor([&] { return loop.syncs() == 1; }));
    absl::Duration took = absl::Now() - start;
    if (conflict) {
      EXPECT_GE(took, absl::Milliseconds(700)) << failure << " waits its backoff";
    } else {
      EXPECT_LT(took, absl::Milliseconds(600)) << "an event ends the wait after " << failure;
    }
    loop.Stop();
  }
}

TEST(SyncLoopTest, StopInterruptsBackoff) {
  SyncLoop loop("x", {.initial = absl::Seconds(30), .max = absl::Seconds(30)},
                [](bool) { return Conflict(); });
  loop.Start();
  absl::SleepFor(absl::Milliseconds(50));
  absl::Time start = absl::Now();
  loop.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

}  // namespace
}  // namespace dra::cddaemon
