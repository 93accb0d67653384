#include "lib/gpuplugin/status/device_status_queue.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"

namespace dra::gpu {
namespace {

// Errors a retry cannot cure: the claim is gone or is another incarnation (the UID precondition),
// the plugin may not write, or the body is refused.
bool Permanent(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsAborted(s) || absl::IsPermissionDenied(s) ||
         absl::IsInvalidArgument(s);
}

std::string KeyOf(const StatusClaimRef& claim) {
  return claim.uid.empty() ? absl::StrCat(claim.namespace_name, "/", claim.name) : claim.uid;
}

// The longest a retry waits while the queue drains at shutdown.
constexpr absl::Duration kDrainRetryDelay = absl::Seconds(1);

}  // namespace

DeviceStatusQueue::DeviceStatusQueue(const DeviceStatusWriter* target,
                                     DeviceStatusQueueOptions options,
                                     metrics::Family<metrics::Gauge>* depth,
                                     metrics::Family<metrics::Counter>* writes)
    : target_(target), options_(options), depth_(depth), writes_(writes) {}

DeviceStatusQueue::~DeviceStatusQueue() { Shutdown(absl::ZeroDuration()); }

void DeviceStatusQueue::Start() {
  absl::MutexLock lock(&mu_);
  if (started_ || closed_) return;
  started_ = true;
  worker_ = std::thread([this] { Worker(); });
}

absl::Status DeviceStatusQueue::Write(const StatusClaimRef& claim,
                                      const std::vector<DeviceStatusEntry>& entries) const {
  return Enqueue(claim, entries);
}

absl::Status DeviceStatusQueue::Remove(const StatusClaimRef& claim) const {
  return Enqueue(claim, std::nullopt);
}

absl::Status DeviceStatusQueue::Enqueue(
    const StatusClaimRef& claim, std::optional<std::vector<DeviceStatusEntry>> entries) const {
  absl::MutexLock lock(&mu_);
  const char* what = entries ? "write" : "removal";
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrCat("device status queue is shut down; the ",
                                                      what, " of claim ", claim.namespace_name, "/",
                                                      claim.name, " is not queued"));
  }
  const std::string key = KeyOf(claim);
  auto it = waiting_.find(key);
  if (it == waiting_.end() && waiting_.size() >= options_.max_claims) {
    const bool removal = !entries.has_value();
    Drop({.claim = claim, .entries = std::move(entries)}, "queue full");
    return absl::ResourceExhaustedError(absl::StrCat(
        "device status queue full (", waiting_.size(), " claims waiting for the API server); the ",
        what, " of claim ", claim.namespace_name, "/", claim.name, " is ",
        removal ? "refused (the unprepare is retried)" : "dropped"));
  }
  const absl::Time now = absl::Now();
  last_call_ = now;
  Desired d{
      .claim = claim, .entries = std::move(entries), .due = now, .since = now, .seq = next_seq_++};
  if (it != waiting_.end()) {
    // The latest state wins and keeps the place in line of the one it replaces (a state waiting
    // for its retry is replaced by one due now, as a first try).
    if (it->second.due <= d.due) {
      d.due = it->second.due;
      d.seq = it->second.seq;
      d.since = it->second.since;
    }
    it->second = std::move(d);
    if (StartAt(it->second) < planned_wake_) ++wakeups_;
  } else {
    auto [added, unused] = waiting_.emplace(key, std::move(d));
    if (StartAt(added->second) < planned_wake_) ++wakeups_;
  }
  UpdateDepth();
  return absl::OkStatus();
}

absl::Time DeviceStatusQueue::StartAt(const Desired& d) const {
  // Removals start at once: a pod's end should clear its entries before the claim is deallocated
  // (whose status.devices would then be cleared by another writer), and a removal that replaced a
  // waiting write costs one GET.
  if (!d.entries || d.attempts > 0 || closed_) return d.due;
  return std::max(d.due, std::min(last_call_ + options_.quiet, d.since + options_.max_delay));
}

void DeviceStatusQueue::Worker() {
  pthread_setname_np(pthread_self(), "status-writer");  // its CPU shows in top -H and the bench
  if (options_.worker_nice != 0) {
    // Linux: PRIO_PROCESS with a thread id sets that thread's nice value alone.
    const auto tid = static_cast<id_t>(syscall(SYS_gettid));
    errno = 0;
    const int base = getpriority(PRIO_PROCESS, tid);
    if (errno != 0 || setpriority(PRIO_PROCESS, tid, base + options_.worker_nice) != 0) {
      DRA_WARNING("device status writer keeps its priority", "nice", options_.worker_nice, "err",
                  std::strerror(errno));
    }
  }
  mu_.Lock();
  while (true) {
    const absl::Time now = absl::Now();
    if (stop_ || (closed_ && (waiting_.empty() || now >= drain_until_))) break;
    auto next = waiting_.end();
    absl::Time next_at = absl::InfiniteFuture();
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      const absl::Time at = StartAt(it->second);
      if (next == waiting_.end() ||
          std::pair(at, it->second.seq) < std::pair(next_at, next->second.seq)) {
        next = it;
        next_at = at;
      }
    }
    // Wait for the next state's start, a state that may start earlier, or the shutdown.
    const absl::Time wake = std::min(next_at, drain_until_);
    if (wake > now) {
      planned_wake_ = wake;
      const uint64_t wakeups = wakeups_;
      const bool closed = closed_;
      auto changed = [this, wakeups, closed]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || wakeups_ != wakeups || closed_ != closed;
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), wake);
      planned_wake_ = absl::InfiniteFuture();
      continue;
    }
    std::string key = next->first;
    Desired d = std::move(next->second);
    waiting_.erase(next);
    in_flight_ = true;
    mu_.Unlock();
    const absl::Status s =
        d.entries ? target_->Write(d.claim, *d.entries) : target_->Remove(d.claim);
    mu_.Lock();
    in_flight_ = false;
    if (!s.ok()) {
      if (waiting_.contains(key)) {
        DRA_VLOG(2, "claim device status write failed; a newer state is queued", "claim",
                 d.claim.uid, "err", s);
      } else {
        Retry(key, std::move(d), s);
      }
    }
    UpdateDepth();
  }
  mu_.Unlock();
}

void DeviceStatusQueue::Retry(const std::string& key, Desired d, const absl::Status& error) {
  ++d.attempts;
  if (Permanent(error)) {
    DRA_VLOG(2, "claim device status not written; not retried", "claim", d.claim.uid, "err", error);
    return;
  }
  if (d.attempts >= options_.max_attempts) {
    Drop(d, absl::StrCat("gave up after ", d.attempts, " attempts: ", error.message()));
    return;
  }
  Backoff backoff(options_.retry);
  absl::Duration delay;
  for (int i = 0; i < d.attempts; ++i) delay = backoff.Next();
  if (closed_) delay = std::min(delay, kDrainRetryDelay);
  DRA_VLOG(2, "claim device status write failed; retrying", "claim", d.claim.uid, "attempt",
           d.attempts, "in", absl::FormatDuration(delay), "err", error);
  d.due = absl::Now() + delay;
  d.seq = next_seq_++;
  waiting_.emplace(key, std::move(d));
}

void DeviceStatusQueue::Drop(const Desired& d, const std::string& why) const {
  const char* operation = d.entries ? "write" : "remove";
  DRA_WARNING("claim device status dropped", "claim", d.claim.uid, "namespace",
              d.claim.namespace_name, "name", d.claim.name, "operation", operation, "why", why);
  if (writes_ != nullptr) writes_->WithLabels({operation, "dropped"})->Inc();
}

void DeviceStatusQueue::UpdateDepth() const {
  if (depth_ != nullptr) {
    depth_->WithLabels({})->Set(static_cast<double>(waiting_.size() + (in_flight_ ? 1 : 0)));
  }
}

size_t DeviceStatusQueue::Shutdown(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return 0;
    closed_ = true;
    drain_until_ = absl::Now() + timeout;
    if (!started_) stop_ = true;
  }
  if (worker_.joinable()) worker_.join();
  absl::MutexLock lock(&mu_);
  const size_t left = waiting_.size();
  for (const auto& [key, d] : waiting_) Drop(d, "shutdown deadline passed");
  waiting_.clear();
  UpdateDepth();
  if (left > 0) {
    DRA_WARNING(
        "device status queue shut down with writes left; the next start writes the "
        "prepared claims' entries again",
        "dropped", left, "timeout", absl::FormatDuration(timeout));
  }
  return left;
}

size_t DeviceStatusQueue::depth() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size() + (in_flight_ ? 1 : 0);
}

bool DeviceStatusQueue::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_.empty() && !in_flight_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

}  // namespace dra::gpu
