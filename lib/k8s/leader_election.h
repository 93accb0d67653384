#pragma once

// Leader election on a coordination.k8s.io/v1 Lease, with the record and timing rules of
// client-go's leaderelection package, so that our controller and a Go one agree on who leads:
//
// - A candidate takes the lease when it does not exist, when its holderIdentity is empty
// (released),
//   or when the record has not changed for lease_duration as seen on the candidate's own clock
//   (not the renewTime written by the holder, so clock skew between nodes does not matter).
// - The leader renews every retry_period; when no renewal succeeded for renew_deadline, or the
//   lease names another holder, leadership is lost.
// - On Stop() with release_on_cancel the leader writes an empty holder (leaseDurationSeconds 1),
//   so that a standby takes over at its next try instead of waiting out the lease.
// - Every write is an Update carrying the resourceVersion read, so two candidates never both win.
//
//   LeaderElector::Callbacks cb{.on_started_leading = [&] { controller.Start(); }};
//   ASSIGN_OR_RETURN(auto elector, LeaderElector::Create(config, lock.get(), cb));
//   absl::Status s = elector->Run();  // until Stop() (OK) or loss (Aborted)
//
// Thread-safety: Run from one thread; Stop, IsLeader from any. Callbacks run on Run's thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/common/clock.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_coordination.h"

namespace dra::k8s {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per process: NewLeaderIdentity(pod name)
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  bool release_on_cancel = true;
};

// Checks what client-go checks: lease_duration > renew_deadline > 1.2 * retry_period > 0, and
// non-empty names and identity. Errors name the setting.
absl::Status ValidateLeaderElectionConfig(const LeaderElectionConfig& config);

// "<pod name>-<random UUID v4>".
std::string NewLeaderIdentity(absl::string_view pod_name);

// Where the lease record lives. Get answers NotFound when absent; Create AlreadyExists when
// present; Update a Conflict (IsConflict) when the lease's resourceVersion is stale.
class LeaseLock {
 public:
  virtual ~LeaseLock() = default;
  virtual absl::StatusOr<Lease> Get() = 0;
  virtual absl::StatusOr<Lease> Create(const Lease& lease) = 0;
  virtual absl::StatusOr<Lease> Update(const Lease& lease) = 0;
  // "namespace/name", for log lines.
  virtual std::string Describe() const = 0;
};

// The lease `ns`/`name` through `client` (which must outlive the lock).
std::unique_ptr<LeaseLock> NewApiLeaseLock(Client* client, std::string ns, std::string name);

class LeaderElector {
 public:
  struct Callbacks {
    std::function<void()> on_started_leading;  // should start work and return
    // After losing the lease, or on Stop() before releasing it: it should stop the work and
    // return only once the work has stopped.
    std::function<void()> on_stopped_leading;
    std::function<void(const std::string& identity)> on_new_leader;  // another holder seen
  };

  // `lock` and `clock` must outlive the elector.
  static absl::StatusOr<std::unique_ptr<LeaderElector>> Create(LeaderElectionConfig config,
                                                               LeaseLock* lock, Callbacks callbacks,
                                                               Clock* clock = RealClock::Get());

  // Tries to acquire every retry_period (jittered up to 1.2x) until it leads or Stop() is called,
  // then renews. Returns OK after Stop() (releasing the lease when configured and leading), or
  // Aborted when leadership was lost.
  absl::Status Run() ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  bool IsLeader() const ABSL_LOCKS_EXCLUDED(mu_);

  // One acquire-or-renew step; true when this candidate holds the lease afterwards. Exposed for
  // tests.
  bool TryAcquireOrRenew();
  // Gives the lease up if this candidate holds it; true when it did (or held nothing).
  bool Release();
  // The holder last seen in the lease ("" when none or released).
  std::string ObservedHolder() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  LeaderElector(LeaderElectionConfig config, LeaseLock* lock, Callbacks callbacks, Clock* clock);
  // Waits `d` on the clock; returns true when stopped meanwhile.
  bool WaitOrStopped(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);
  void Observe(const Lease& lease) ABSL_LOCKS_EXCLUDED(mu_);

  const LeaderElectionConfig config_;
  LeaseLock* const lock_;
  const Callbacks callbacks_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<LeaseSpec> observed_ ABSL_GUARDED_BY(mu_);
  absl::Time observed_time_ ABSL_GUARDED_BY(mu_);
  std::string reported_leader_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra::k8s
