#pragma once

// Time as a dependency: logic takes a Clock* so that tests can drive time with FakeClock instead
// of sleeping.
//
//   absl::MutexLock lock(&mu_);
//   // Wait for a stop request or the resync period, whichever comes first.
//   clock_->AwaitWithTimeout(&mu_, absl::Condition(&stop_requested_), resync_period);

#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dra {

// Thread-safety: every method may be called from any thread.
class Clock {
 public:
  virtual ~Clock() = default;

  virtual absl::Time Now() = 0;
  // Returns after `d` has passed on this clock (at once for d <= 0).
  virtual void SleepFor(absl::Duration d) = 0;
  // Like absl::Mutex::AwaitWithDeadline on this clock's time: waits until `cond` holds or
  // `deadline` passes, and returns whether `cond` holds. `mu` is released while waiting.
  // REQUIRES: `mu` is held by the caller (it is held again on return).
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  bool AwaitWithTimeout(absl::Mutex* mu, const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return AwaitWithDeadline(mu, cond, Now() + timeout);
  }
};

// The system clock.
class RealClock final : public Clock {
 public:
  // The process-wide instance; never destroyed.
  static RealClock* Get();

  absl::Time Now() override;
  void SleepFor(absl::Duration d) override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

 private:
  RealClock() = default;
};

// A clock that moves only when told. SleepFor and AwaitWithDeadline block (for real) until
// Advance/SetTime moves the time past their deadline, or for Await, until the condition holds.
//
// Tests typically start a thread that sleeps, call BlockUntilWaiters(1) to know it is asleep, then
// Advance.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));
  ~FakeClock() override;

  absl::Time Now() override ABSL_LOCKS_EXCLUDED(mu_);
  void SleepFor(absl::Duration d) override ABSL_LOCKS_EXCLUDED(mu_);
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) ABSL_LOCKS_EXCLUDED(mu_);

  // Moves time forward by `d` (ignored unless > 0) and wakes every waiter whose deadline has
  // passed. REQUIRES: the caller holds no mutex that a waiter passed to AwaitWithDeadline.
  void Advance(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);
  // Sets the time; ignored when `t` is not after Now() (time never goes back). REQUIRES: as
  // Advance.
  void SetTime(absl::Time t) ABSL_LOCKS_EXCLUDED(mu_);

  // Threads currently in SleepFor or AwaitWithDeadline.
  int NumWaiters() ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks (for real) until at least `n` threads are waiting on this clock.
  void BlockUntilWaiters(int n) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter;
  void MoveTo(absl::Time t, absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
  // Threads in AwaitWithDeadline (the Waiters live on their stacks).
  std::set<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra
