#include "lib/common/work_queue.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

// Waits (real time) until `pred` holds; false after 10 s.
template <typename Pred>
bool Eventually(Pred pred) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return pred();
}

struct Log {
  absl::Mutex mu;
  std::vector<std::string> runs;
  void Add(const std::string& s) {
    absl::MutexLock l(&mu);
    runs.push_back(s);
  }
  std::vector<std::string> Get() {
    absl::MutexLock l(&mu);
    return runs;
  }
};

TEST(WorkQueueTest, LatestItemOfAKeyWinsBeforeItRuns) {
  WorkQueue q({.qps = 0});
  Log log;
  for (const char* v : {"a1", "a2", "a3"}) {
    q.Enqueue("a", [&log, v] {
      log.Add(v);
      return absl::OkStatus();
    });
  }
  q.Enqueue("b", [&log] {
    log.Add("b");
    return absl::OkStatus();
  });
  EXPECT_EQ(q.Pending(), 2u);
  q.Start();
  ASSERT_TRUE(q.WaitIdle(absl::Seconds(10)));
  std::vector<std::string> runs = log.Get();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_NE(std::find(runs.begin(), runs.end(), "a3"), runs.end());
  EXPECT_NE(std::find(runs.begin(), runs.end(), "b"), runs.end());
}

// Before: the exception left the worker thread, and std::terminate ended the process.
TEST(WorkQueueTest, AnItemThatThrowsFailsAloneAndTheWorkerGoesOn) {
  WorkQueue q({.qps = 0, .workers = 1});
  Log log;
  std::atomic<int> attempts{0};
  q.Enqueue("bad", [&] {
    if (++attempts == 1) throw std::runtime_error("type must be string, but is number");
    log.Add("bad retried");
    return absl::OkStatus();
  });
  q.Enqueue("good", [&log] {
    log.Add("good");
    return absl::OkStatus();
  });
  q.Start();
  ASSERT_TRUE(q.WaitIdle(absl::Seconds(10)));
  std::vector<std::string> runs = log.Get();
  EXPECT_NE(std::find(runs.begin(), runs.end(), "good"), runs.end());
  // Failed like an error: retried after its backoff, and then succeeded.
  EXPECT_NE(std::find(runs.begin(), runs.end(), "bad retried"), runs.end());
  EXPECT_EQ(attempts.load(), 2);
  EXPECT_EQ(q.Exceptions(), 1);
  EXPECT_EQ(q.Failures("bad"), 0);
}

TEST(WorkQueueTest, AKeyNeverRunsTwiceAtOnceAndAnItemParkedDuringARunRunsAfterIt) {
  WorkQueue q({.qps = 0, .workers = 4});
  q.Start();
  absl::Notification entered, release;
  std::atomic<int> concurrent{0}, max_concurrent{0};
  Log log;
  auto make = [&](const std::string& name, bool block) {
    return [&, name, block] {
      int c = ++concurrent;
      int m = max_concurrent.load();
      while (c > m && !max_concurrent.compare_exchange_weak(m, c)) {
      }
      if (block) {
        entered.Notify();
        release.WaitForNotification();
      }
      log.Add(name);
      --concurrent;
      return absl::OkStatus();
    };
  };
  q.Enqueue("k", make("first", true));
  entered.WaitForNotification();
  q.Enqueue("k", make("second", false));
  q.Enqueue("k", make("third", false));    // replaces the parked "second"
  absl::SleepFor(absl::Milliseconds(50));  // idle workers had the chance to misbehave
  EXPECT_EQ(log.Get().size(), 0u);
  release.Notify();
  ASSERT_TRUE(q.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(log.Get(), (std::vector<std::string>{"first", "third"}));
  EXPECT_EQ(max_concurrent.load(), 1);
}

TEST(WorkQueueTest, FailedItemIsRetriedWithExponentialBackoffUntilItSucceeds) {
  FakeClock clock;
  WorkQueue q({.base_delay = absl::Seconds(1), .max_delay = absl::Seconds(3), .qps = 0}, &clock);
  q.Start();
  std::atomic<int> calls{0};
  q.Enqueue("k",
            [&] { return ++calls <= 3 ? absl::UnavailableError("not yet") : absl::OkStatus(); });
  ASSERT_TRUE(Eventually([&] { return calls == 1 && q.Failures("k") == 1; }));
  // Retry 1 after 1 s.
  clock.Advance(absl::Milliseconds(999));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(calls, 1);
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(Eventually([&] { return calls == 2 && q.Failures("k") == 2; }));
  // Retry 2 after 2 s.
  clock.Advance(absl::Milliseconds(1999));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(calls, 2);
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(Eventually([&] { return calls == 3 && q.Failures("k") == 3; }));
  // Retry 3 after 4 s, capped at 3 s.
  clock.Advance(absl::Seconds(3));
  ASSERT_TRUE(Eventually([&] { return calls == 4; }));
  ASSERT_TRUE(q.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(q.Failures("k"), 0);
}

TEST(WorkQueueTest, FailedItemIsDroppedWhenANewerItemOfItsKeyArrivedDuringTheRun) {
  FakeClock clock;
  WorkQueue q({.base_delay = absl::Seconds(1), .qps = 0}, &clock);
  q.Start();
  absl::Notification entered, release;
  std::atomic<int> old_calls{0}, new_calls{0};
  q.Enqueue("k", [&] {
    ++old_calls;
    entered.Notify();
    release.WaitForNotification();
    return absl::InternalError("old state failed");
  });
  entered.WaitForNotification();
  q.Enqueue("k", [&] {
    ++new_calls;
    return absl::OkStatus();
  });
  release.Notify();
  ASSERT_TRUE(Eventually([&] { return new_calls == 1; }));
  clock.Advance(absl::Hours(1));  // any retry of the old item would be due now
  ASSERT_TRUE(q.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(old_calls, 1);
  EXPECT_EQ(new_calls, 1);
  EXPECT_EQ(q.Failures("k"), 0);
}

TEST(WorkQueueTest, RetryDelayIsJitteredWithinBounds) {
  for (double r : {0.0, 0.999}) {
    FakeClock clock;
    WorkQueue q({.base_delay = absl::Seconds(10), .jitter = 0.5, .qps = 0}, &clock,
                [r] { return r; });
    q.Start();
    std::atomic<int> calls{0};
    q.Enqueue("k", [&] { return ++calls == 1 ? absl::UnavailableError("x") : absl::OkStatus(); });
    ASSERT_TRUE(Eventually([&] { return q.Failures("k") == 1; }));
    // r = 0 gives 10 s * 0.5 = 5 s; r ~ 1 gives ~15 s.
    const absl::Duration expected = r == 0.0 ? absl::Seconds(5) : absl::Seconds(14.99);
    clock.Advance(expected - absl::Milliseconds(20));
    absl::SleepFor(absl::Milliseconds(20));
    EXPECT_EQ(calls, 1) << "r=" << r;
    clock.Advance(absl::Milliseconds(20));
    ASSERT_TRUE(Eventually([&] { return calls == 2; })) << "r=" << r;
  }
}

TEST(WorkQueueTest, TokenBucketDelaysAFloodAcrossKeys) {
  FakeClock clock;
  WorkQueue q({.qps = 1, .burst = 2}, &clock);
  q.Start();
  std::atomic<int> calls{0};
  for (int i = 0; i < 4; ++i) {
    q.Enqueue("k" + std::to_string(i), [&] {
      ++calls;
      return absl::OkStatus();
    });
  }
  ASSERT_TRUE(Eventually([&] { return calls == 2; }));  // the burst
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(calls, 2);
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually([&] { return calls == 3; }));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually([&] { return calls == 4; }));
}

TEST(WorkQueueTest, EnqueueAfterWaitsAndAnEarlierEnqueueOfTheKeyWins) {
  FakeClock clock;
  WorkQueue q({.qps = 0}, &clock);
  q.Start();
  Log log;
  q.EnqueueAfter(
      "k",
      [&] {
        log.Add("late");
        return absl::OkStatus();
      },
      absl::Seconds(30));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(log.Get().empty());
  q.EnqueueAfter(
      "k",
      [&] {
        log.Add("soon");
        return absl::OkStatus();
      },
      absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually([&] { return log.Get().size() == 1; }));
  EXPECT_EQ(log.Get()[0], "soon");
  clock.Advance(absl::Seconds(60));
  ASSERT_TRUE(q.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(log.Get().size(), 1u);
}

TEST(WorkQueueTest, StopDropsWaitingItemsAndIgnoresLaterEnqueues) {
  FakeClock clock;
  WorkQueue q({.qps = 0}, &clock);
  q.Start();
  std::atomic<int> calls{0};
  q.EnqueueAfter(
      "k",
      [&] {
        ++calls;
        return absl::OkStatus();
      },
      absl::Seconds(5));
  q.Stop();
  q.Enqueue("j", [&] {
    ++calls;
    return absl::OkStatus();
  });
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(q.Pending(), 0u);
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace dra
