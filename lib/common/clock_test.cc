#include "lib/common/clock.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

TEST(RealClockTest, IsASingletonThatTicks) {
  RealClock* clock = RealClock::Get();
  EXPECT_EQ(clock, RealClock::Get());
  const absl::Time start = clock->Now();
  EXPECT_LE(absl::AbsDuration(start - absl::Now()), absl::Seconds(5));
  clock->SleepFor(absl::Milliseconds(5));
  EXPECT_GE(clock->Now() - start, absl::Milliseconds(5));
  clock->SleepFor(-absl::Seconds(1));  // returns at once
}

TEST(RealClockTest, AwaitReturnsConditionOrTimesOut) {
  absl::Mutex mu;
  bool flag = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(
      RealClock::Get()->AwaitWithTimeout(&mu, absl::Condition(&flag), absl::Milliseconds(5)));
  flag = true;
  EXPECT_TRUE(RealClock::Get()->AwaitWithTimeout(&mu, absl::Condition(&flag), absl::Hours(1)));
}

TEST(FakeClockTest, NowMovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.Advance(-absl::Seconds(1));          // ignored
  clock.SetTime(absl::FromUnixSeconds(50));  // time never goes back
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.SetTime(absl::FromUnixSeconds(200));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(200));
}

TEST(FakeClockTest, NonPositiveSleepReturnsAtOnce) {
  FakeClock clock;
  clock.SleepFor(absl::ZeroDuration());
  clock.SleepFor(-absl::Seconds(3));
  EXPECT_EQ(clock.NumWaiters(), 0);
}

TEST(FakeClockTest, AdvanceWakesOnlySleepersWhoseDeadlinePassed) {
  FakeClock clock;
  const absl::Duration sleeps[] = {absl::Seconds(1), absl::Seconds(5), absl::Seconds(10)};
  std::atomic<int> woken[3] = {0, 0, 0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      clock.SleepFor(sleeps[i]);
      woken[i] = 1;
    });
  }
  clock.BlockUntilWaiters(3);
  clock.Advance(absl::Seconds(5));  // wakes 1s and 5s, not 10s
  threads[0].join();
  threads[1].join();
  EXPECT_EQ(woken[0].load(), 1);
  EXPECT_EQ(woken[1].load(), 1);
  EXPECT_EQ(woken[2].load(), 0);
  EXPECT_EQ(clock.NumWaiters(), 1);
  clock.Advance(absl::Seconds(4));
  EXPECT_EQ(woken[2].load(), 0);
  clock.Advance(absl::Seconds(1));
  threads[2].join();
  EXPECT_EQ(woken[2].load(), 1);
  EXPECT_EQ(clock.NumWaiters(), 0);
}

TEST(FakeClockTest, AwaitReturnsFalseWhenFakeDeadlinePasses) {
  FakeClock clock;
  absl::Mutex mu;
  bool stop = false;
  absl::Notification done;
  bool result = true;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock.AwaitWithTimeout(&mu, absl::Condition(&stop), absl::Minutes(10));
    done.Notify();
  });
  clock.BlockUntilWaiters(1);
  clock.Advance(absl::Minutes(9));
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  clock.Advance(absl::Minutes(1));
  waiter.join();
  EXPECT_FALSE(result);
  EXPECT_EQ(clock.NumWaiters(), 0);
}

TEST(FakeClockTest, AwaitReturnsTrueWhenConditionTurnsTrue) {
  FakeClock clock;
  absl::Mutex mu;
  bool stop = false;
  bool result = false;
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock.AwaitWithTimeout(&mu, absl::Condition(&stop), absl::Hours(1));
  });
  clock.BlockUntilWaiters(1);
  {
    absl::MutexLock lock(&mu);
    stop = true;
  }
  waiter.join();
  EXPECT_TRUE(result);
  EXPECT_EQ(clock.NumWaiters(), 0);
}

TEST(FakeClockTest, AwaitFastPaths) {
  FakeClock clock;
  absl::Mutex mu;
  bool yes = true;
  bool no = false;
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&yes), clock.Now() - absl::Seconds(1)));
  EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&no), clock.Now()));
  EXPECT_EQ(clock.NumWaiters(), 0);
}

// Many waiters on one mutex, advanced in small steps from another thread while the condition is
// toggled: every waiter must return, and none may hang or crash.
TEST(FakeClockTest, StressAdvanceAndConditions) {
  FakeClock clock;
  absl::Mutex mu;
  bool flag = false;
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 8; ++i) {
    waiters.emplace_back([&, i] {
      for (int round = 0; round < 50; ++round) {
        absl::MutexLock lock(&mu);
        clock.AwaitWithTimeout(&mu, absl::Condition(&flag), absl::Milliseconds(1 + i + round));
      }
      ++returned;
    });
  }
  std::thread toggler([&] {
    while (returned.load() < 8) {
      {
        absl::MutexLock lock(&mu);
        flag = !flag;
      }
      clock.Advance(absl::Milliseconds(3));
    }
  });
  for (auto& t : waiters) t.join();
  toggler.join();
  EXPECT_EQ(returned.load(), 8);
  EXPECT_EQ(clock.NumWaiters(), 0);
}

}  // namespace
}  // namespace dra
