#pragma once

// A rate-limited work queue of keyed work items, for controllers: the latest item of a key wins,
// a key never runs twice at once, and a failed item comes back after a jittered exponential
// backoff of its own key.
//
//   dra::WorkQueue queue({.name = "compute-domains"});
//   queue.Start();
//   queue.Enqueue("cd/" + uid, [=] { return Reconcile(uid); });
//   ...
//   queue.Stop();
//
// Semantics, per key:
// - Enqueue while an item of the key waits replaces that item's work (coalescing: a burst of
//   events runs once) and keeps the earlier of the two due times.
// - Enqueue while the key's item runs parks the new item; it is scheduled when the run ends, so
//   runs of one key never overlap and the newest state is always looked at after the last event.
// - A failed item is retried after the key's backoff (base_delay * 2^(failures-1), capped at
//   max_delay, scaled by a random factor in [1 - jitter, 1 + jitter]) unless a newer item of the
//   key arrived meanwhile: then the failed one is dropped and the newer one runs ("latest wins").
// - Success resets the key's backoff.
// - A work function that throws fails that item like an error status would (retried after the
//   key's backoff), logged as a warning and counted (Exceptions()); it never ends a worker, so
//   one bad object cannot stop a controller.
// Every enqueue (not the retries) also passes a token bucket over all keys (qps, burst) that
// delays items when the queue is flooded, like client-go's default controller rate limiter.
//
// Thread-safety: every method may be called from any thread, including from work functions.
// Work functions run on the worker threads without any queue lock held.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/common/backoff.h"
#include "lib/common/clock.h"

namespace dra {

struct WorkQueueOptions {
  std::string name = "workqueue";  // in log lines
  absl::Duration base_delay = absl::Milliseconds(5);
  absl::Duration max_delay = absl::Seconds(1000);
  double jitter = 0.0;  // fraction of the retry delay, in [0, 1]
  double qps = 10;      // token bucket over all enqueues; <= 0 disables it
  int burst = 100;
  int workers = 1;
};

class WorkQueue {
 public:
  using Work = std::function<absl::Status()>;

  // `clock` and `random` (uniform in [0, 1)) are for tests; they must outlive the queue.
  explicit WorkQueue(WorkQueueOptions options = {}, Clock* clock = RealClock::Get(),
                     Backoff::RandomSource random = nullptr);
  // Stops (see Stop).
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Starts the worker threads. Items enqueued before Start wait for it.
  void Start();
  // Drops the items not yet running, waits for the running ones and joins the workers. Enqueue
  // after Stop is ignored.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Schedules `work` for `key` after the token bucket's delay.
  void Enqueue(const std::string& key, Work work) ABSL_LOCKS_EXCLUDED(mu_);
  // Schedules `work` for `key` no sooner than `delay` from now (the token bucket is not asked).
  void EnqueueAfter(const std::string& key, Work work, absl::Duration delay)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Items waiting or parked (not running).
  size_t Pending() const ABSL_LOCKS_EXCLUDED(mu_);
  // Work functions that threw, since the queue was made.
  int64_t Exceptions() const ABSL_LOCKS_EXCLUDED(mu_);
  // Consecutive failures of `key` (0 when it last succeeded or never ran).
  int Failures(const std::string& key) const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until no item waits or runs, or `timeout` (real time) passes; returns whether idle.
  // Items due in the future count as waiting.
  bool WaitIdle(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Item {
    Work work;
    absl::Time due;
  };
  struct KeyState {
    std::unique_ptr<Item> waiting;  // in the heap (one live heap entry, matched by `seq`)
    std::unique_ptr<Item> parked;   // arrived while running
    bool running = false;
    uint64_t seq = 0;  // of the live heap entry
    int failures = 0;
    std::unique_ptr<Backoff> backoff;
  };
  struct HeapEntry {
    absl::Time due;
    uint64_t seq;
    std::string key;
    bool operator>(const HeapEntry& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  void Add(const std::string& key, Work work, absl::Time due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(const std::string& key, KeyState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The token bucket's delay for one more item.
  absl::Duration TakeToken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Worker() ABSL_LOCKS_EXCLUDED(mu_);
  void Finish(const std::string& key, Work work, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const WorkQueueOptions options_;
  Clock* const clock_;
  const Backoff::RandomSource random_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped whenever a worker should look again
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t exceptions_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, KeyState> keys_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<>> heap_ ABSL_GUARDED_BY(mu_);
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refill_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

}  // namespace dra
