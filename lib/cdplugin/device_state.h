#pragma once

// Prepare and unprepare of compute-domain claims: one attempt each, checkpointed, idempotent
// (docs/compute-domains.md "Prepare"). Retrying is the driver's (driver.h).
//
// Prepare of a claim:
//   1. a PrepareCompleted claim returns its recorded devices; a PrepareAborted claim with the
//      same allocation is a permanent error ("stale prepare"); no allocation is permanent;
//   2. the configs (claim_configs.h; errors permanent);
//   3. (planning, no side effect) channel devices: the ComputeDomain must be in the informer
//      cache and in the claim's namespace (permanent otherwise); daemon devices: the claim must
//      be in the driver namespace (permanent otherwise: the device hands out the domain's IMEX
//      directory and the fabric-imex-mgmt capability, which only the driver's IMEX DaemonSets
//      may have);
//   4. checkpoint, in one read-modify-write (the first write of the step journal): no device of
//      the claim may be held by another PrepareCompleted claim (retryable: "channel 0 already
//      allocated by claim <uid> (according to checkpoint)"); the claim is recorded PrepareStarted
//      with its devices (and the steps an unfinished earlier prepare recorded);
//   5. the steps of claim_steps.h on the prepare engine (lib/prepare/plan.h), each kind over the
//      claim's devices:
//      driver-managed channel devices: nodeLabel (the node label
//      resource.nvidia.com/computeDomain=<cdUID>; retryable while another domain holds it), then
//      channel (this node's daemon must be Ready in the clique, retryable "not ready"; edits:
//      channel device nodes, none on a node without a clique ID: the claim succeeds without a
//      CDI device);
//      daemon devices: imexConfig (the domain must be cached, retryable; <data dir>/domains/
//      <cdUID>/ (0755) gets imexd.cfg.tmpl (0644, atomically); edits per cdi_specs.h);
//      hostManaged (options.host_imex set): a daemon device is a permanent error (step 3); a
//      channel device has no nodeLabel step and its channel step waits for no clique: on a node
//      with a clique ID the host's IMEX daemon must answer READY (host_imex.h; retryable), then
//      the allocated channel's one device node (allocationMode is ignored); none without a
//      clique ID;
//   6. cdiSpec: the claim's CDI spec is written; the claim is recorded PrepareCompleted with its
//      CDI IDs and steps.
// An error after step 4 leaves the claim PrepareStarted with the steps recorded so far (every step
// is resumable): the kubelet retries, which keeps the steps it repeats (a label set before a
// failed readiness check stays), or unprepares.
//
// Unprepare of a claim: not recorded or PrepareAborted: nothing to do. Otherwise the recorded
// steps are undone in reverse (records without steps: derived from the devices, claim_steps.h
// LegacySteps): nodeLabel removes the node label (driver-managed only; only if it names that
// domain, and no other recorded, not aborted claim on this node has a channel of that domain).
// Then the CDI spec is removed, and a PrepareCompleted claim is erased while a PrepareStarted one
// becomes PrepareAborted. An undo that fails leaves the record as it was (the retry undoes it all
// again). The per-domain directory is kept (a new daemon pod of the same domain may be starting);
// the cleanup removes directories of domains that are gone.
//
// A checkpoint record that does not decode (another version, an edit) is ignored by Prepare (the
// claim is prepared again) and dropped by Unprepare (its CDI spec removed): neither can wedge a
// pod.
//
// Thread-safety: Prepare/Unprepare may run concurrently from any threads. Calls for one claim are
// serialized by a per-claim mutex; checkpoint read-modify-writes are atomic (lib/checkpoint);
// nothing is held across calls, so a channel claim that is not ready yet never blocks the daemon
// claim it waits for.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/cdplugin/cdi_specs.h"
#include "lib/cdplugin/claim_steps.h"
#include "lib/cdplugin/domain_api.h"
#include "lib/cdplugin/host_imex.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/clock.h"
#include "lib/driverroot/driver_root.h"
#include "lib/k8s/objects_resource.h"
#include "lib/kubeletplugin/driver.h"

namespace dra::cdplugin {

struct DeviceStateOptions {
  std::string node_name;  // the pool name
  // The driver's namespace: the only one whose claims may have daemon devices (the IMEX
  // DaemonSets' pods). Empty refuses every daemon device.
  std::string driver_namespace;
  std::string plugin_dir;  // <data dir>: domains/ lives here
  std::string clique_id;   // "" on a node without NVLink fabric; see SetCliqueId
  int64_t imex_channels_major = 0;
  const driverroot::DriverRoot* root = nullptr;  // IMEX binaries, capability files
  Clock* clock = nullptr;                        // RealClock when null
  // Set: --imex-mode=hostManaged (the host runs nvidia-imex); must outlive the state.
  const HostImex* host_imex = nullptr;
};

class DeviceState {
 public:
  // Every pointer must outlive the state.
  DeviceState(DeviceStateOptions options, checkpoint::Checkpoint* checkpoint, CdiSpecs* cdi,
              DomainApi* api);

  absl::StatusOr<std::vector<kubeletplugin::PreparedDevice>> Prepare(
      const k8s::ResourceClaim& claim);
  absl::Status Unprepare(const std::string& claim_uid);

  // Devices of PrepareCompleted claims by type ("channel", "daemon", "unknown" for records that
  // do not decode).
  absl::StatusOr<std::map<std::string, int>> PreparedDeviceCounts() const;

  // <data dir>/domains/<cdUID>.
  std::string DomainDir(const std::string& cd_uid) const;
  std::string DomainsDir() const { return options_.plugin_dir + "/domains"; }
  std::string clique_id() const;
  // Adopts a rediscovered clique ID for later prepares (prepared claims keep theirs). Only a
  // non-empty value is adopted: a GPU that drops off the fabric for a moment must not turn the
  // node into a non-fabric node. Returns whether the value changed.
  bool SetCliqueId(const std::string& clique_id);

 private:
  std::shared_ptr<absl::Mutex> ClaimMutex(const std::string& uid);
  // What this prepare's steps use (the clique ID as it is now).
  StepEnv Env() const;
  bool host_managed() const { return options_.host_imex != nullptr; }

  const DeviceStateOptions options_;
  checkpoint::Checkpoint* const checkpoint_;
  CdiSpecs* const cdi_;
  DomainApi* const api_;
  Clock* const clock_;

  mutable absl::Mutex clique_mu_;
  std::string clique_id_ ABSL_GUARDED_BY(clique_mu_);

  absl::Mutex claims_mu_;
  std::map<std::string, std::shared_ptr<absl::Mutex>> claim_mutexes_ ABSL_GUARDED_BY(claims_mu_);
};

}  // namespace dra::cdplugin
