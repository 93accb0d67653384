#include "lib/cddaemon/sync_loop.h"

#include "lib/common/log.h"
#include "lib/k8s/errors.h"

namespace dra::cddaemon {

void SyncLoop::Start() {
  worker_ = std::thread([this] { Run(); });
}

void SyncLoop::Wake() {
  absl::MutexLock lock(&mu_);
  dirty_ = true;
  changed_since_failure_ = true;
}

int SyncLoop::syncs() const {
  absl::MutexLock lock(&mu_);
  return syncs_;
}

void SyncLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (worker_.joinable()) worker_.join();
}

void SyncLoop::Run() {
  Backoff backoff(backoff_);
  bool reread = false;
  mu_.Lock();
  while (!stop_) {
    mu_.Await(absl::Condition(
        +[](SyncLoop* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return l->dirty_ || l->stop_; },
        this));
    if (stop_) break;
    dirty_ = false;
    mu_.Unlock();
    absl::Status s = sync_(reread);
    mu_.Lock();
    if (s.ok()) {
      backoff.Reset();
      reread = false;
      ++syncs_;
      continue;
    }
    // An AlreadyExists on create means a peer created the object first: a conflict too. A
    // timeout or a 429 means the API server is behind: an early retry would add to its queue
    // (after a timeout it may still be applying the first try), so those wait the whole delay too.
    conflict_ = k8s::IsConflict(s) || absl::IsAlreadyExists(s) || absl::IsDeadlineExceeded(s) ||
                k8s::Reason(s) == "TooManyRequests";
    reread = true;
    absl::Duration delay = backoff.Next();
    if (conflict_) {
      DRA_VLOG(2, "write conflicted; retrying on the latest object", "object", what_, "delay",
               delay);
    } else {
      DRA_WARNING("sync failed; retrying", "object", what_, "err", s, "delay", delay);
    }
    dirty_ = true;
    changed_since_failure_ = false;
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](SyncLoop* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) {
                               return l->stop_ || (!l->conflict_ && l->changed_since_failure_);
                             },
                             this),
                         delay);
  }
  mu_.Unlock();
}

}  // namespace dra::cddaemon
