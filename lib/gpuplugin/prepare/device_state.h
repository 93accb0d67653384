#pragma once

// Prepare and unprepare of GPU and static-MIG claims (docs/prepare-flow.md): resolves
// the claim's configs, checks that no device is already held by another prepared claim (or, with
// consumable shares, that the claims sharing a device configure it alike), then runs the claim's
// plan of steps (claim_steps.h: time-slicing, MPS control daemons, the CDI spec, the claim's
// device status) through the step
// engine (lib/prepare/plan.h), which records in the checkpoint what may have been applied, so that
// unprepare works from the checkpoint alone. Both operations are idempotent.
//
// Crash consistency (lib/prepare/plan.h has the rules): a step with a side effect outside this
// process's files (nvidia-smi, an MPS daemon) is recorded, PrepareStarted, before it begins;
// claims without such a step go straight to PrepareCompleted after the CDI spec is written. A
// failing time-slicing or MPS step leaves the claim PrepareStarted; a retried prepare finishes
// the recorded steps its plan repeats and undoes the others first; unprepare (the cleanup's, when
// the claim is gone) undoes every recorded step in reverse. A crash before the first record
// leaves at most a CDI spec that the retried prepare rewrites or the cleanup removes. Records
// written before steps were recorded are read through claim_steps.h LegacySteps.
//
// MPS (gate MPSSupport, docs/mps.md): each config group with strategy MPS gets a control daemon
// (mps_sharing.h). Its record goes into the checkpoint with the PrepareStarted claim before the
// daemon starts; prepare then waits until the daemon is ready (options.mps_ready_timeout from the
// start of Prepare) and adds the daemon's pipe directory and /dev/shm to the CDI devices of the
// group. A retried prepare keeps (and completes) the daemons the record names; unprepare stops
// them, and a failure to stop keeps the claim in the checkpoint so that the kubelet retries.
//
// Shared GPUs: unprepare resets the time-slice of a GPU only when no other completely prepared
// claim holds it (consumable shares), so the last claim using a GPU restores it.
//
// Thread-safety: Prepare/Unprepare may be called from any thread; they serialize on an internal
// mutex (the caller adds the cross-process flock).

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/api/consumable_shares.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/clock.h"
#include "lib/common/deadline.h"
#include "lib/common/feature_gates.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/mps/mps_sharing.h"
#include "lib/gpuplugin/prepare/claim_cdi.h"
#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/prepare/device_configs.h"
#include "lib/gpuplugin/prepare/device_metadata.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/gpuplugin/status/device_status.h"
#include "lib/gpuplugin/timeslicing/time_slicing.h"
#include "lib/gpuplugin/vfio/vfio_claim.h"
#include "lib/k8s/objects_resource.h"

namespace dra::gpu {

inline constexpr char kDriverName[] = "gpu.nvidia.com";

class DeviceState {
 public:
  struct Options {
    std::string driver_name = kDriverName;
    std::string pool_name;  // the node name
    const FeatureGates* gates = nullptr;
    // --consumable-shares: when enabled, a device may be prepared for several claims whose
    // normalized configs for it are equal; MPS is refused.
    api::ConsumableShares consumable_shares;
    // What the steps act through (claim_steps.h ClaimStepServices says what each null means for
    // the steps). Besides, DeviceState refuses with Internal, before any step, a claim that asks
    // for time-slicing without `time_slicing` or for MPS without `mps`. Its `cdi` and `vfio` are
    // replaced: DeviceState sets them from its `cdi` argument and from `vfio` below.
    ClaimStepServices services;
    // How long, from the start of Prepare, an MPS daemon may take to become ready: inside the
    // kubelet's 45 s prepare timeout, so that the error reaches the kubelet.
    absl::Duration mps_ready_timeout = absl::Seconds(30);
    // --device-status: whether prepare writes the claims' status.devices entries (the deviceStatus
    // step, through services.device_status). Off, unprepare still removes the entries a record
    // names.
    bool write_device_status = true;
    // Gate PassthroughSupport: the VFIO devices' PCI facts and the host to bind them through
    // (vfio_claim.h; its host becomes services.vfio). Null: a claim with a VFIO device fails
    // (Internal); unprepare of a record naming vfio steps fails.
    const VfioPlanning* vfio = nullptr;
    // Gate PassthroughSupport: called with the names of the devices any claim records (in any
    // state) from CountPreparedDevices, which runs after each committed checkpoint write by this
    // object, with the claims as written, still under the checkpoint's lock (must not touch the
    // checkpoint): the plugin republishes its slice without their gpu/vfio siblings
    // (vfio_claim.h). A write that fails reports nothing. Null: nothing.
    std::function<void(const std::set<std::string>& held)> on_held_devices;
    Clock* clock = RealClock::Get();
  };

  // `cdi`, `checkpoint`, `gates`, the services, `vfio` and `clock` must outlive this object.
  DeviceState(Inventory inventory, const ClaimCdi* cdi, checkpoint::Checkpoint* checkpoint,
              Options options);

  // The devices prepared for `claim` (REQUIRES: allocated). Errors caused by the claim's own
  // configuration are permanent (api::IsPermanentConfigError). `deadline` (the kubelet's) caps the
  // MPS readiness wait and nvidia-smi, and a step not begun before it fails the prepare with
  // DeadlineExceeded, leaving what a failure of that step leaves.
  absl::StatusOr<std::vector<RecordedDevice>> Prepare(
      const k8s::ResourceClaim& claim, const Deadline& deadline = Deadline::Infinite());
  // Undoes Prepare using the checkpoint alone; an unknown claim is success.
  absl::Status Unprepare(const std::string& claim_uid);
  // Records `claim` as PrepareCompleted with the devices a prepare would record (time-slice and
  // MPS daemon included), without touching any device or CDI spec: for a claim whose CDI spec is
  // on disk and that the API server says is in use on this node, after its record was lost (a
  // corrupt checkpoint), so that unprepare undoes it again. False when the claim already has a
  // record (left as it is). REQUIRES: the caller holds the prep lock, as for Prepare.
  absl::StatusOr<bool> Rebuild(const k8s::ResourceClaim& claim);

  const Inventory& inventory() const { return inventory_; }

  // Devices of completely prepared claims by type ("gpu", "mig", ...), as of the last checkpoint
  // write this object committed (or CountPreparedDevices).
  std::map<std::string, int> PreparedDeviceCounts() const;
  // Recounts from `claims` (e.g. the checkpoint at startup).
  void CountPreparedDevices(const checkpoint::ClaimMap& claims);

 private:
  // What prepare would do for a claim: its config groups, the devices to record (configs[i] is
  // the config of prepared[i], pointing into groups), the MPS daemons (not started) with the
  // devices each serves, the time-slices to set, and the steps (claim_steps.h's table).
  struct Plan {
    std::vector<ConfigGroup> groups;
    std::vector<RecordedDevice> prepared;
    std::vector<const api::Config*> configs;
    struct Daemon {
      std::unique_ptr<MpsDaemon> daemon;
      std::vector<std::string> device_names;
      std::optional<MpsDaemonGroup> dynamic_group;  // MpsGroup::dynamic_group
    };
    std::vector<Daemon> daemons;
    std::vector<TimeSliceGroup> time_slices;
    // MigDeviceConfig time-slicing: each MIG device with a non-Default interval for its parent.
    struct MigInterval {
      std::string device;
      std::string parent_uuid;
      api::TimeSliceInterval interval = api::TimeSliceInterval::kDefault;
    };
    std::vector<MigInterval> mig_intervals;
    StatusClaimRef status_claim;
    std::vector<DeviceStatusEntry> device_statuses;  // one per allocation result of this driver
    std::optional<MetadataClaim> metadata;           // gate DeviceMetadata
    std::vector<VfioTarget> vfio;                    // gate PassthroughSupport
    std::vector<VfioCdiRequest> vfio_cdi;
    // Declared after `daemons`: the steps point into them (and into their own context).
    GpuPlan steps;
  };
  // REQUIRES: the claim is allocated (FailedPrecondition otherwise). No side effects. The steps
  // are planned last, so that a plan function's error (fabricPartition: no matching partition)
  // comes after the configs' and the devices' and before the checks against other claims.
  absl::StatusOr<Plan> PlanLocked(const k8s::ResourceClaim& claim,
                                  absl::Time mps_ready_deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<RecordedDevice>> PrepareLocked(const k8s::ResourceClaim& claim,
                                                            const Deadline& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses devices that other PrepareCompleted claims in `all` hold, unless consumable shares
  // allow it and the configs are equal. `configs[i]` is the config of `prepared[i]`.
  absl::Status CheckOverlap(const std::string& uid, const checkpoint::ClaimMap& all,
                            const std::vector<RecordedDevice>& prepared,
                            const std::vector<const api::Config*>& configs) const;
  // Refuses (permanent config error, nothing changed) a claim whose MIG devices ask for a
  // non-Default interval on a parent GPU for which another PrepareCompleted claim in `all` holds a
  // different one, or whose own MIG devices ask for two different ones (time_slicing.h).
  absl::Status CheckMigIntervals(const k8s::ResourceClaim& claim, const checkpoint::ClaimMap& all,
                                 const std::vector<Plan::MigInterval>& wanted) const;
  // Gate PassthroughSupport: the bind targets and CDI edits of the claim's VFIO devices; refuses
  // more than one VfioDeviceConfig group (as the Go driver).
  absl::Status PlanVfio(const std::string& uid, Plan& plan) const;
  // The steps of `plan` (claim_steps.h's table); they point into `plan` (its MPS daemons) and
  // into the returned plan's context.
  absl::StatusOr<GpuPlan> StepsOf(const std::string& uid, const Plan& plan,
                                  absl::Time mps_ready_deadline) const;
  // `options` with the services' `cdi` and `vfio` set from `cdi` and `options.vfio`.
  static Options WithOwnServices(Options options, const ClaimCdi* cdi);
  // Gate TimeSlicingSettings (for records without timeSliceApplied).
  bool time_slicing_gate() const;
  const FeatureGates& gates() const;

  const Inventory inventory_;
  const ClaimCdi* const cdi_;
  checkpoint::Checkpoint* const checkpoint_;
  const Options options_;
  absl::Mutex mu_;
  mutable absl::Mutex counts_mu_;
  std::map<std::string, int> prepared_counts_ ABSL_GUARDED_BY(counts_mu_);
};

}  // namespace dra::gpu
