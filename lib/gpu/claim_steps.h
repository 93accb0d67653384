#pragma once

// The steps of a GPU claim's prepare (lib/prepare/plan.h), in one place. In order:
//
//   (resolve the configs, plan the devices, check overlaps, find the claim's fabric partition:
//    DeviceState, no side effect)
//   fabricPartition FabricManagerPartitioning: activate the Fabric Manager partition whose GPUs
//                   are exactly the claim's full GPUs and VFIO GPUs (fabric_step.h). External,
//                   not resumable. Undo: deactivate it unless another claim records one of its
//                   GPUs.
//   0. migDevices   DynamicMIG: create each dynamic MIG device of the claim (MIG mode on if
//                   needed, GPU instance at the allocated placement, compute instance), recording
//                   the MIG UUIDs (mig_step.h). External, resumable.
//                   Undo: destroy them by GPU, profile and placement; MIG mode off (Hopper+)
//                   when the GPU has no instance left.
//   1. timeSlicing  nvidia-smi: compute mode DEFAULT and the group's interval on the full GPUs of
//                   each time-sliced config group; for a MigDeviceConfig group with a non-Default
//                   interval, that interval alone on the MIG devices' parent GPUs ("migParents",
//                   time_slicing.h). External, resumable.
//                   Undo: reset those GPUs that no other completed claim holds (a MIG parent:
//                   on which no other completed claim's record holds a non-Default interval).
//   2. mpsDaemons   start each MPS config group's control daemon, wait until it is ready, and
//                   collect its CDI edits for the group's devices. External, resumable.
//                   Undo: stop each daemon.
//   vfio*           PassthroughSupport: per VFIO device vfioModule, vfioPersistence, vfioUnbind,
//                   vfioBind (vfio_bind.h): the GPU from nvidia to its vfio driver. External, not
//                   resumable. Undo: back to nvidia, persistence mode on.
//   vfioCdiEdits    the VFIO devices' CDI edits (/dev/vfio/<group> or the iommufd cdev read after
//                   the bind). The plugin's own state only. Undo: nothing.
//   3. deviceMetadata (gate DeviceMetadata) each request's metadata file and its CDI spec
//                   (device_metadata.h). The plugin's own files, recorded before they are written.
//                   Undo: remove them.
//   4. cdiSpec      write the claim's CDI spec, one CDI device per distinct device, with the
//                   daemons' edits. The plugin's own file. Undo: remove the spec.
//   5. deviceStatus server-side apply of the claim's status.devices entries of this driver
//                   (device_status.h), each with its data and a Ready condition. External (recorded
//                   before the write, so that unprepare removes what reached the server), not
//                   resumable, best effort: a failed write is a warning, never a failed prepare.
//                   Undo: remove the entries (a claim that is gone is success).
//   (record PrepareCompleted: the engine)
//
// A step is in the plan only when the claim needs it (cdiSpec always; deviceStatus when the plugin
// writes device status, --device-status).
//
// Records written before steps were recorded (and adopted Go records) have none: LegacySteps
// derives them from the recorded devices, so that such claims are unprepared, and their unfinished
// prepares rolled back, as before.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "lib/api/types.h"
#include "lib/cdi/spec.h"
#include "lib/checkpoint/format.h"
#include "lib/gpu/claim_cdi.h"
#include "lib/gpu/device_metadata.h"
#include "lib/gpu/device_status.h"
#include "lib/gpu/fabric_step.h"
#include "lib/gpu/mig_step.h"
#include "lib/gpu/mps_sharing.h"
#include "lib/gpu/prepared.h"
#include "lib/gpu/time_slicing.h"
#include "lib/gpu/vfio_bind.h"
#include "lib/gpu/vfio_claim.h"
#include "lib/prepare/plan.h"

namespace dra::gpu {

inline constexpr char kTimeSlicingStep[] = "timeSlicing";
inline constexpr char kMpsDaemonsStep[] = "mpsDaemons";
inline constexpr char kCdiSpecStep[] = "cdiSpec";
inline constexpr char kDeviceStatusStep[] = "deviceStatus";

// The full GPUs of one time-sliced config group (each once) and its interval; or, with
// `mig_parents`, the parent GPUs of a MigDeviceConfig group's MIG devices (each once), whose
// interval alone is set (time_slicing.h). Recorded as {"interval", "gpus", "migParents"?: true}.
struct TimeSliceGroup {
  api::TimeSliceInterval interval = api::TimeSliceInterval::kDefault;
  std::vector<std::string> gpu_uuids;
  bool mig_parents = false;
};

// A non-Default interval that a completed claim's record holds on a MIG parent GPU.
struct HeldMigInterval {
  api::TimeSliceInterval interval = api::TimeSliceInterval::kDefault;
  std::string claim_uid;
  std::string namespace_name;
  std::string name;
};

// Parent GPU UUID -> the interval that a PrepareCompleted claim other than `uid` holds on it, from
// the "migParents" groups of the claims' recorded timeSlicing steps (the checkpoint, so it
// survives a plugin restart). Several claims may hold the same interval on one GPU (DeviceState
// refuses a different one); the map names one of them.
std::map<std::string, HeldMigInterval> MigParentIntervalsHeld(const std::string& uid,
                                                              const checkpoint::ClaimMap& all);

// One MPS config group: its daemon (created, not started) and the names of its devices.
struct MpsGroup {
  MpsDaemon* daemon = nullptr;
  std::vector<std::string> device_names;
  // DynamicMIG: the group as planned, with stand-ins for its MIG devices' UUIDs
  // (mps_sharing.h); the step starts a daemon made from it once migDevices created them, under
  // `daemon`'s id. Unset: `daemon` is started.
  std::optional<MpsDaemonGroup> dynamic_group;
};

// What the plan of one claim needs to know.
struct ClaimStepsInput {
  std::string claim_uid;
  std::vector<TimeSliceGroup> time_slices;  // empty: no timeSlicing step
  std::vector<MpsGroup> mps;                // empty: no mpsDaemons step
  std::vector<PreparedDevice> cdi_devices;  // one per distinct allocated device
  absl::Time mps_ready_deadline = absl::InfiniteFuture();
  // Unset: no deviceStatus step. Else the claim and its entries of this driver.
  std::optional<StatusClaimRef> status_claim;
  std::vector<DeviceStatusEntry> device_statuses;
  // Unset: no deviceMetadata step (gate DeviceMetadata off).
  std::optional<MetadataClaim> metadata;
  // Gate PassthroughSupport: the GPUs to hand to vfio (vfio_bind.h steps, in this order), and
  // the VFIO devices whose CDI edits the vfioCdiEdits step adds after the binds (vfio_claim.h).
  std::vector<VfioTarget> vfio;
  std::vector<VfioCdiRequest> vfio_cdi;
  // Gate FabricManagerPartitioning: the partition to activate; unset: no fabricPartition step.
  std::optional<FabricTarget> fabric;
};

// What the steps act through. Null time_slicing or mps: a step that needs it fails (Apply:
// Internal; Undo: FailedPrecondition).
struct ClaimStepServices {
  const TimeSlicing* time_slicing = nullptr;
  const MpsDaemons* mps = nullptr;
  const ClaimCdi* cdi = nullptr;
  // Null: the deviceStatus step writes nothing (a warning), and its Undo cannot remove entries
  // (a warning, success: the entries are informational and must not block an unprepare).
  const DeviceStatusWriter* device_status = nullptr;
  // Null: a deviceMetadata step fails (Apply: Internal; Undo: FailedPrecondition).
  const DeviceMetadataFiles* metadata = nullptr;
  // DynamicMIG (mig_step.h): creates and destroys the claim's MIG devices. Null: a migDevices
  // step fails (Apply: Internal; Undo: FailedPrecondition).
  const MigManager* mig = nullptr;
  // PassthroughSupport (vfio_bind.h). Null: no vfio steps are planned (DeviceState refuses a
  // VFIO claim before), and a record naming vfio steps cannot be undone (no undoer).
  const VfioHost* vfio = nullptr;
  // FabricManagerPartitioning (fabric_step.h). Null: a fabricPartition step fails (Apply:
  // Internal; Undo: FailedPrecondition when the partition is not shared).
  const fm::FabricManager* fabric = nullptr;
};

// The plan: the steps above in order. `in.mps` daemons must outlive the steps.
prepare::PlanSteps GpuClaimSteps(const ClaimStepsInput& in, const ClaimStepServices& services);

// Their records with every step applied (what a completed prepare records).
std::vector<prepare::StepRecord> AppliedRecords(const prepare::PlanSteps& steps);

// How each step is undone for claim `claim_uid`; `others` (every checkpointed claim) says which
// GPUs other completed claims still hold. `others` and the services must outlive the result.
prepare::StepUndoers GpuClaimUndoers(const std::string& claim_uid,
                                     const checkpoint::ClaimMap& others,
                                     const ClaimStepServices& services);

// The record of `claim`: its steps, or, for an entry without (LegacySteps), those its devices
// imply. `time_slicing_gate`: gate TimeSlicingSettings, for devices without timeSliceApplied.
// An unreadable record is logged and leaves only the cdiSpec step.
std::vector<prepare::StepRecord> RecordedSteps(const checkpoint::PreparedClaim& claim,
                                               bool time_slicing_gate);

// The steps a record without any implies: timeSlicing over the full GPUs whose timeSliceApplied
// is true (absent: `time_slicing_gate`), without an interval; mpsDaemons with the distinct
// daemons; cdiSpec. Applied when `completed`, else begun.
std::vector<prepare::StepRecord> LegacySteps(const std::vector<PreparedDevice>& devices,
                                             bool completed, bool time_slicing_gate);

}  // namespace dra::gpu
