#pragma once

// The retry discipline of the daemon's worker (CliqueFollower, which retries a failed hosts-file
// update): events only mark the state dirty and one worker thread runs `sync` (latest wins;
// nothing can block the informer that reports the events). A failed sync is retried after a
// jittered exponential backoff (kWriteBackoff by default). After a conflict the whole delay is
// waited, which spreads many daemons writing one object, and so after a timeout or a 429 (an API
// server that is behind); after other errors (no free index, connection refused) an event ends the
// wait early, since it may be the change that helps.
//
// Thread-safety: Start and Stop from one thread; Wake from any thread. `sync` runs on the worker
// thread only.

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "lib/common/backoff.h"

namespace dra::cddaemon {

// 20 ms doubling to 6 s, each delay drawn from [0, 2x]: "full" jitter, because the daemons of one
// clique start together and lose their writes together; with ±25 % they retried in step and lost
// again (bench/computedomain, 18 daemons: 107 conflicts and 4.4 s to Ready with 5 ms ±25 %, 40 and
// 3.4 s with this; 72 daemons: 586 and 17.1 s, 477 and 17.1 s).
inline constexpr BackoffOptions kWriteBackoff{
    .initial = absl::Milliseconds(20), .max = absl::Seconds(6), .factor = 2.0, .jitter = 1.0};

class SyncLoop {
 public:
  // `sync(reread)`: reread is true after a failure, when cached state may be stale.
  SyncLoop(std::string what, BackoffOptions backoff, std::function<absl::Status(bool reread)> sync)
      : what_(std::move(what)), backoff_(backoff), sync_(std::move(sync)) {}
  ~SyncLoop() { Stop(); }
  SyncLoop(const SyncLoop&) = delete;
  SyncLoop& operator=(const SyncLoop&) = delete;

  void Start();  // runs one sync at once
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for a running sync to finish; no sync runs afterwards. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  int syncs() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string what_;
  const BackoffOptions backoff_;
  const std::function<absl::Status(bool)> sync_;
  mutable absl::Mutex mu_;
  bool dirty_ ABSL_GUARDED_BY(mu_) = true;
  bool changed_since_failure_ ABSL_GUARDED_BY(mu_) = false;
  bool conflict_ ABSL_GUARDED_BY(mu_) = false;  // the last failure was a conflict
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int syncs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread worker_;
};

}  // namespace dra::cddaemon
