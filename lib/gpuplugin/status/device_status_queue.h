#pragma once

// Device status writes off the kubelet's call path: an ordered background writer in front of the
// API server's DeviceStatusWriter (device_status.h).
//
//   DeviceStatusQueue queue(api_writer.get(), {}, depth_gauge, writes_counter);
//   queue.Start();
//   queue.Write(claim, entries);   // returns at once; the apply follows on the worker
//   queue.Remove(claim);           // returns at once; the removal follows, after any write
//   ...
//   queue.Shutdown(absl::Seconds(10));  // SIGTERM: the queued writes, within the deadline
//
// Contract:
// - Write and Remove only record the claim's desired state (its entries, or none) and return OK;
//   one worker thread applies it through `target`. Prepare therefore returns before the entries
//   reach the API server: a reader of the claim sees them some time after NodePrepareResources
//   returned (after the quiet period below, 50 ms to 1 s by default; with the API server slow or
//   down, after the retries), and may see a container running before they show. Likewise the
//   entries disappear shortly after NodeUnprepareResources returned.
// - Writes are deferred until the calls go quiet: a write's first try waits until no Write or
//   Remove arrived for `quiet`, or until `max_delay` after the first of its claim's waiting states
//   arrived, whichever comes first (so a steady stream of calls delays a write by at most
//   `max_delay`). Removals start at once (the entries go before the claim is deallocated). The
//   writes (their JSON, TLS and the API server's and etcd's work, and the claim watch's events they
//   cause) then run between the kubelet's calls instead of beside them, and a claim prepared and
//   unprepared within that time is written once, as the removal. Retries keep their backoff. The
//   worker runs at `worker_nice` (a lower priority than the gRPC threads): on a busy node the calls
//   go first, the writes still get their share of the CPU (nice, not SCHED_IDLE).
// - Per claim (keyed by UID; by namespace/name when the UID is empty) the latest desired state
//   wins: a Write or Remove that arrives while an older one still waits replaces it in its place in
//   line (a removal after a write that has not run yet means the write never runs). What arrives
//   while the claim's write is in flight waits for it: the writes of one claim reach the API server
//   in the order they were asked for, so a removal is never overtaken by the write before it.
// - A failed write is retried after a backoff (`retry`) unless a newer state of the claim arrived
//   meanwhile (which then runs instead), or the error cannot go away by itself (NotFound,
//   Conflict - another incarnation of the claim -, PermissionDenied, InvalidArgument), or
//   `max_attempts` were made. A claim that waits for its retry does not hold up the others.
// - Bounded memory: at most `max_claims` claims wait. Beyond that a Write of another claim is
//   dropped (ResourceExhausted: the deviceStatus step logs it, the prepare succeeds) and a Remove
//   is refused (ResourceExhausted: the unprepare fails and the kubelet retries it, the record
//   stays). A node's claims are far fewer than the default 4096, so this needs an API server that
//   is unreachable for a long time and many claims at once.
// - Shutdown(deadline) (the plugin's SIGTERM path, after the kubelet socket is closed): no new
//   state is accepted (FailedPrecondition), the worker applies what waits at once (no quiet
//   period; retries without the long backoff) until the queue is empty or the deadline passed;
//   what is left is logged and dropped.
// - A crash (or a shutdown past its deadline) loses only the states still queued. The next start
//   converges again: every PrepareCompleted claim of the checkpoint whose deviceStatus step
//   recorded its entries is written again (PluginApp; RecordedDeviceStatus in claim_steps.h), so
//   a lost write comes back. A lost removal is not replayed (the record is gone once unprepare
//   returned): that claim keeps this node's entries until it is deleted, or prepared again and
//   unprepared.
//
// Metrics: the target's nvidia_dra_device_status_writes_total counts every attempt; this queue
// adds result="dropped" there for states given up, and `depth` (gauge
// nvidia_dra_device_status_queue_depth) is the number of claims waiting or in flight.
//
// Thread-safety: every method may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/common/backoff.h"
#include "lib/gpuplugin/status/device_status.h"
#include "lib/metrics/metrics.h"

namespace dra::gpu {

struct DeviceStatusQueueOptions {
  size_t max_claims = 4096;
  // A first try waits for `quiet` without new calls, at most `max_delay` (zero: at once).
  absl::Duration quiet = absl::Milliseconds(50);
  absl::Duration max_delay = absl::Seconds(1);
  // The worker thread's nice value, relative to the process's (0: unchanged). Lowering a
  // thread's priority needs no privilege; a failure is logged and the worker runs on.
  int worker_nice = 10;
  BackoffOptions retry = {.initial = absl::Milliseconds(200), .max = absl::Seconds(30)};
  int max_attempts = 10;  // per desired state, the first try included
};

class DeviceStatusQueue final : public DeviceStatusWriter {
 public:
  // `target` writes for real; `depth` (gauge, no labels) and `writes` (the target's counter
  // family, labels {operation, result}) may be null. All must outlive the queue.
  DeviceStatusQueue(const DeviceStatusWriter* target, DeviceStatusQueueOptions options = {},
                    metrics::Family<metrics::Gauge>* depth = nullptr,
                    metrics::Family<metrics::Counter>* writes = nullptr);
  // Shutdown with no time left: what waits is dropped (the running write is waited for).
  ~DeviceStatusQueue() override;
  DeviceStatusQueue(const DeviceStatusQueue&) = delete;
  DeviceStatusQueue& operator=(const DeviceStatusQueue&) = delete;

  // Starts the worker. States queued before wait for it.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);

  // Queue `entries` (or the removal) as the claim's desired state; see the contract above.
  absl::Status Write(const StatusClaimRef& claim,
                     const std::vector<DeviceStatusEntry>& entries) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Remove(const StatusClaimRef& claim) const override ABSL_LOCKS_EXCLUDED(mu_);

  // Applies what waits until the queue is empty or `timeout` passed, then stops the worker.
  // Returns how many claims' states were dropped. Later calls return 0.
  size_t Shutdown(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // Claims waiting or in flight.
  size_t depth() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until nothing waits or runs, or `timeout` passed; returns whether idle.
  bool WaitIdle(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Desired {
    StatusClaimRef claim;
    std::optional<std::vector<DeviceStatusEntry>> entries;  // unset: remove
    int attempts = 0;                                       // failed tries so far
    absl::Time due;    // earliest start: arrival, or the retry's backoff
    absl::Time since;  // arrival of the first state of its claim still waiting (max_delay)
    uint64_t seq = 0;  // arrival order among states due at the same time
  };

  absl::Status Enqueue(const StatusClaimRef& claim,
                       std::optional<std::vector<DeviceStatusEntry>> entries) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void Worker() ABSL_LOCKS_EXCLUDED(mu_);
  // After a failed try of `d` (no newer state of its key waits): queue it again or drop it.
  void Retry(const std::string& key, Desired d, const absl::Status& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Drop(const Desired& d, const std::string& why) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateDepth() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When `d` may start: `due`, and for a first try outside the drain also the quiet rule.
  absl::Time StartAt(const Desired& d) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DeviceStatusWriter* const target_;
  const DeviceStatusQueueOptions options_;
  metrics::Family<metrics::Gauge>* const depth_;
  metrics::Family<metrics::Counter>* const writes_;

  mutable absl::Mutex mu_;
  mutable std::map<std::string, Desired> waiting_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  mutable uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Time last_call_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // Write/Remove
  // The worker sleeps until `planned_wake_`; a state that may start earlier bumps `wakeups_`.
  absl::Time planned_wake_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  mutable uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // Shutdown: nothing more is accepted
  absl::Time drain_until_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // the worker ends
  std::thread worker_;
};

}  // namespace dra::gpu
