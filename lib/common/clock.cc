#include "lib/common/clock.h"

#include <atomic>
#include <vector>

namespace dra {

RealClock* RealClock::Get() {
  static RealClock* const kClock = new RealClock();
  return kClock;
}

absl::Time RealClock::Now() { return absl::Now(); }

void RealClock::SleepFor(absl::Duration d) {
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

bool RealClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  return mu->AwaitWithDeadline(cond, deadline);
}

// A thread inside FakeClock::AwaitWithDeadline. Advance marks it expired and then locks and
// unlocks its mutex, which makes absl::Mutex evaluate the waiter's condition again. `pokers` keeps
// the Waiter (and the caller's mutex) alive until Advance is done with it.
struct FakeClock::Waiter {
  absl::Mutex* mu;
  absl::Time deadline;
  std::atomic<bool> expired{false};
  int pokers = 0;  // guarded by FakeClock::mu_
};

FakeClock::FakeClock(absl::Time start) : now_(start) {}

FakeClock::~FakeClock() = default;

absl::Time FakeClock::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::SleepFor(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = now_ + d;
  ++sleepers_;
  auto passed = [this, deadline]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return now_ >= deadline; };
  mu_.Await(absl::Condition(&passed));
  --sleepers_;
}

bool FakeClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  if (cond.Eval()) return true;
  Waiter waiter;
  waiter.mu = mu;
  waiter.deadline = deadline;
  {
    absl::MutexLock lock(&mu_);
    if (now_ >= deadline) return false;
    waiters_.insert(&waiter);
  }
  auto wake = [&waiter, &cond] { return waiter.expired.load() || cond.Eval(); };
  mu->Await(absl::Condition(&wake));
  // Leave the list with `mu` released: an Advance that is about to poke `mu` needs it.
  mu->Unlock();
  {
    absl::MutexLock lock(&mu_);
    waiters_.erase(&waiter);
    auto unpoked = [&waiter]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return waiter.pokers == 0; };
    mu_.Await(absl::Condition(&unpoked));
  }
  mu->Lock();
  return cond.Eval();
}

void FakeClock::Advance(absl::Duration d) { MoveTo(absl::InfinitePast(), d); }

void FakeClock::SetTime(absl::Time t) { MoveTo(t, absl::ZeroDuration()); }

void FakeClock::MoveTo(absl::Time t, absl::Duration d) {
  std::vector<Waiter*> poke;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time target = d > absl::ZeroDuration() ? now_ + d : t;
    if (target <= now_) return;
    now_ = target;  // sleepers see it when mu_ is released
    for (Waiter* waiter : waiters_) {
      if (!waiter->expired.load() && waiter->deadline <= now_) {
        waiter->expired.store(true);
        ++waiter->pokers;
        poke.push_back(waiter);
      }
    }
  }
  for (Waiter* waiter : poke) {
    waiter->mu->Lock();
    waiter->mu->Unlock();
  }
  absl::MutexLock lock(&mu_);
  for (Waiter* waiter : poke) --waiter->pokers;
}

int FakeClock::NumWaiters() {
  absl::MutexLock lock(&mu_);
  return sleepers_ + static_cast<int>(waiters_.size());
}

void FakeClock::BlockUntilWaiters(int n) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return sleepers_ + static_cast<int>(waiters_.size()) >= n;
  };
  mu_.Await(absl::Condition(&enough));
}

}  // namespace dra
