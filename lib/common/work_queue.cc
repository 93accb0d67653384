#include "lib/common/work_queue.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"

namespace dra {
namespace {

// Runs `work`; an exception becomes an Internal error naming it (*threw set).
absl::Status RunCatching(const WorkQueue::Work& work, bool* threw) {
  try {
    return work();
  } catch (const std::exception& e) {
    *threw = true;
    return absl::InternalError(absl::StrCat("work item threw: ", e.what()));
  } catch (...) {
    *threw = true;
    return absl::InternalError("work item threw a non-standard exception");
  }
}

}  // namespace

WorkQueue::WorkQueue(WorkQueueOptions options, Clock* clock, Backoff::RandomSource random)
    : options_(std::move(options)), clock_(clock), random_(std::move(random)) {
  tokens_ = options_.burst;
  last_refill_ = clock_->Now();
}

WorkQueue::~WorkQueue() { Stop(); }

void WorkQueue::Start() {
  const int n = std::max(1, options_.workers);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Worker(); });
}

void WorkQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    ++version_;
    heap_ = {};
    for (auto& [key, state] : keys_) {
      state.waiting.reset();
      state.parked.reset();
    }
  }
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

absl::Duration WorkQueue::TakeToken() {
  if (options_.qps <= 0) return absl::ZeroDuration();
  const absl::Time now = clock_->Now();
  const double elapsed = absl::ToDoubleSeconds(now - last_refill_);
  if (elapsed > 0) {
    tokens_ = std::min<double>(options_.burst, tokens_ + elapsed * options_.qps);
    last_refill_ = now;
  }
  tokens_ -= 1;
  return tokens_ >= 0 ? absl::ZeroDuration() : absl::Seconds(-tokens_ / options_.qps);
}

void WorkQueue::Enqueue(const std::string& key, Work work) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  Add(key, std::move(work), clock_->Now() + TakeToken());
}

void WorkQueue::EnqueueAfter(const std::string& key, Work work, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  Add(key, std::move(work), clock_->Now() + std::max(delay, absl::ZeroDuration()));
}

void WorkQueue::Add(const std::string& key, Work work, absl::Time due) {
  KeyState& state = keys_[key];
  if (state.running) {
    // Runs after the current one; the newest work wins, the earliest due time stays.
    if (state.parked) due = std::min(due, state.parked->due);
    state.parked = std::make_unique<Item>(Item{std::move(work), due});
    return;
  }
  if (state.waiting) due = std::min(due, state.waiting->due);
  state.waiting = std::make_unique<Item>(Item{std::move(work), due});
  Push(key, state);
}

void WorkQueue::Push(const std::string& key, KeyState& state) {
  state.seq = ++next_seq_;
  heap_.push(HeapEntry{state.waiting->due, state.seq, key});
  ++version_;
}

void WorkQueue::Worker() {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) return;
    // Drop heap entries superseded by a later Push of their key.
    while (!heap_.empty()) {
      auto it = keys_.find(heap_.top().key);
      if (it != keys_.end() && it->second.waiting && it->second.seq == heap_.top().seq) break;
      heap_.pop();
    }
    const uint64_t seen = version_;
    auto changed = [this, seen]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || version_ != seen; };
    if (heap_.empty()) {
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&changed), absl::InfiniteFuture());
      continue;
    }
    const absl::Time due = heap_.top().due;
    if (due > clock_->Now()) {
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&changed), due);
      continue;
    }
    const std::string key = heap_.top().key;
    heap_.pop();
    KeyState& state = keys_[key];
    Work work = std::move(state.waiting->work);
    state.waiting.reset();
    state.running = true;
    ++running_;
    mu_.Unlock();
    bool threw = false;
    absl::Status status = RunCatching(work, &threw);
    if (threw) {
      DRA_WARNING("work item threw; failed, to be retried", "queue", options_.name, "key", key,
                  "err", status);
    }
    mu_.Lock();
    if (threw) ++exceptions_;
    --running_;
    Finish(key, std::move(work), status);
    ++version_;
  }
}

void WorkQueue::Finish(const std::string& key, Work work, const absl::Status& status) {
  KeyState& state = keys_[key];
  state.running = false;
  if (status.ok()) {
    state.failures = 0;
    state.backoff.reset();
  } else {
    ++state.failures;
    if (!state.backoff) {
      state.backoff = std::make_unique<Backoff>(BackoffOptions{.initial = options_.base_delay,
                                                               .max = options_.max_delay,
                                                               .factor = 2.0,
                                                               .jitter = options_.jitter},
                                                random_);
    }
    const absl::Duration delay = state.backoff->Next();
    if (state.parked) {
      DRA_INFO("work item failed; a newer one of its key replaces it", "queue", options_.name,
               "key", key, "attempt", state.failures, "err", status);
    } else if (!stopping_) {
      DRA_INFO("work item failed; retrying", "queue", options_.name, "key", key, "attempt",
               state.failures, "retryIn", delay, "err", status);
      state.waiting = std::make_unique<Item>(Item{std::move(work), clock_->Now() + delay});
      Push(key, state);
    }
  }
  if (state.parked && !stopping_) {
    state.waiting = std::move(state.parked);
    Push(key, state);
  }
  state.parked.reset();
  if (!state.waiting && state.failures == 0) keys_.erase(key);
}

size_t WorkQueue::Pending() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [key, state] : keys_) n += (state.waiting ? 1 : 0) + (state.parked ? 1 : 0);
  return n;
}

int64_t WorkQueue::Exceptions() const {
  absl::MutexLock lock(&mu_);
  return exceptions_;
}

int WorkQueue::Failures(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  return it == keys_.end() ? 0 : it->second.failures;
}

bool WorkQueue::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (running_ > 0) return false;
    for (const auto& [key, state] : keys_) {
      if (state.waiting || state.parked) return false;
    }
    return true;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

}  // namespace dra
