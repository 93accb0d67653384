#pragma once

// The steps of a GPU claim's prepare (lib/prepare/plan.h): one table, GpuStepTable, whose
// entries (lib/prepare/step_table.h) name, document, plan and undo each kind of step, in plan
// order. GpuClaimSteps and GpuClaimUndoers come from it, and so does the step table of
// docs/prepare-flow.md (gpu-kubelet-plugin --help-steps-markdown, hack/gen-reference.sh): what
// each step does, when it is planned, and how it is undone is written there, not here.
//
// Before the steps, DeviceState (device_state.h) resolves the configs and plans the devices, with
// no side effect, into ClaimStepsInput, and plans the steps right after (a plan function's error,
// such as fabricPartition's unmatched partition, comes before the checks against other claims).
// Steps hand data to later steps through the plan's ClaimStepContext only.
//
// Adding a step: its file (the step, its plan and undo functions) and its entry in GpuStepTable.
// An entry plans from the claim's planned devices (ClaimStepsInput::devices) and the services; a
// step that acts through a new service adds its pointer to ClaimStepServices, which PluginApp
// fills (DeviceState::Options::services). A step that needs more of the claim's plan than its
// devices adds an input field, filled by DeviceState::StepsOf.
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
#include "lib/gpuplugin/fabric/fabric_step.h"
#include "lib/gpuplugin/mig/mig_step.h"
#include "lib/gpuplugin/mps/mps_sharing.h"
#include "lib/gpuplugin/prepare/claim_cdi.h"
#include "lib/gpuplugin/prepare/device_metadata.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/gpuplugin/status/device_status.h"
#include "lib/gpuplugin/timeslicing/time_slicing.h"
#include "lib/gpuplugin/vfio/vfio_bind.h"
#include "lib/gpuplugin/vfio/vfio_claim.h"
#include "lib/prepare/plan.h"
#include "lib/prepare/step_table.h"

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
  // Every planned device of the claim, in allocation result order (adminAccess ones included;
  // with consumable shares a device may appear more than once).
  std::vector<RecordedDevice> devices;
  std::vector<TimeSliceGroup> time_slices;  // empty: no timeSlicing step
  std::vector<MpsGroup> mps;                // empty: no mpsDaemons step
  std::vector<RecordedDevice> cdi_devices;  // one per distinct allocated device
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
  // Gate FabricManagerPartitioning, on a node with an FM fabric: the partitions, the GPUs'
  // module IDs and the manager (fabric_step.h). Null: no fabricPartition step (a claim's GPUs are
  // not matched), and its Undo fails (FailedPrecondition) when the partition is not shared. A null
  // manager: the step's Apply fails (Internal).
  const FabricPartitioning* fabric = nullptr;
};

// What the steps of one plan hand to later steps. Owned by GpuPlan together with the steps,
// which point into it.
struct ClaimStepContext {
  // Written by migDevices (each dynamic MIG device as created, by device name); read by
  // migDevices' own undo data, mpsDaemons (the daemons' MIG UUIDs), cdiSpec (the CDI devices)
  // and deviceStatus (the entries' uuid).
  CreatedMigDevices created_mig;
  // Device name -> CDI edits beyond the device's own: written by mpsDaemons (the daemon's
  // edits, appended) and vfioCdiEdits (the VFIO device nodes, replaced); read by cdiSpec.
  std::map<std::string, cdi::ContainerEdits> edits;
};

// A claim's plan: its steps and the context they point into (declared first: destroyed last).
struct GpuPlan {
  std::unique_ptr<ClaimStepContext> context = std::make_unique<ClaimStepContext>();
  prepare::PlanSteps steps;
};

// What an undo consults besides its record: the claim, every checkpointed claim (which GPUs
// other completed claims still hold), the services.
struct GpuUndoEnv {
  std::string claim_uid;
  const checkpoint::ClaimMap* others = nullptr;
  ClaimStepServices services;
};

using GpuStepKind =
    prepare::StepKind<ClaimStepsInput, ClaimStepServices, ClaimStepContext, GpuUndoEnv>;

// The GPU plugin's kinds of step, in plan order.
const std::vector<GpuStepKind>& GpuStepTable();

// GpuStepTable as the Markdown table of docs/prepare-flow.md (gpu-kubelet-plugin
// --help-steps-markdown).
std::string GpuStepTableMarkdown();

// The plan: each kind's steps, in table order, as the claim needs them. `in.mps` daemons must
// outlive the steps.
absl::StatusOr<GpuPlan> GpuClaimSteps(const ClaimStepsInput& in, const ClaimStepServices& services);

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
std::vector<prepare::StepRecord> LegacySteps(const std::vector<RecordedDevice>& devices,
                                             bool completed, bool time_slicing_gate);

}  // namespace dra::gpu
