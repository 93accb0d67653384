#pragma once

// The steps of a compute-domain claim's prepare (lib/prepare/plan.h): one table, CdStepTable,
// whose entries (lib/prepare/step_table.h) name, document, plan and undo each kind of step, in
// plan order, each kind over the claim's devices in allocation order. PlanClaimSteps and
// ClaimUndoers come from it, and so does the step table of docs/compute-domains.md "Prepare"
// (compute-domain-kubelet-plugin --help-steps-markdown, hack/gen-reference.sh): what each step
// does, when it is planned, and how it is undone is written there, not here.
//
// Recorded undo data: {"domain": "<cdUID>"} for nodeLabel, none for the others.
//
// Every step is resumable: a failed prepare leaves the claim PrepareStarted with what it recorded
// (the kubelet retries, or unprepares: device_state.h), as the plugin did before it had steps.
//
// Records written before steps were recorded have none: LegacySteps derives them from the
// recorded devices, so that such claims are unprepared, and their unfinished prepares finished,
// as before.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/cdi/spec.h"
#include "lib/cdplugin/cdi_specs.h"
#include "lib/cdplugin/domain_api.h"
#include "lib/cdplugin/host_imex.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/driverroot/driver_root.h"
#include "lib/k8s/objects_resource.h"
#include "lib/prepare/plan.h"
#include "lib/prepare/step_table.h"

namespace dra::cdplugin {

inline constexpr char kNodeLabelStep[] = "nodeLabel";
inline constexpr char kChannelStep[] = "channel";
inline constexpr char kImexConfigStep[] = "imexConfig";
inline constexpr char kCdiSpecStep[] = "cdiSpec";

// What the steps and their undoers use of the plugin; every pointer outlives them.
struct StepEnv {
  DomainApi* api = nullptr;
  CdiSpecs* cdi = nullptr;
  checkpoint::Checkpoint* checkpoint = nullptr;
  const driverroot::DriverRoot* root = nullptr;
  const HostImex* host_imex = nullptr;  // set: hostManaged
  std::string node_name;
  int64_t imex_channels_major = 0;
  std::string domains_dir;  // <data dir>/domains
  std::string clique_id;    // this prepare's
};

// What the steps of one prepare hand on: the edits to the cdiSpec step, the CDI IDs to the
// PrepareCompleted record.
struct ClaimContext {
  std::map<std::string, cdi::ContainerEdits> edits;  // by device name (channel, imexConfig)
  std::map<std::string, std::string> cdi_ids;        // by device name (cdiSpec)
};

// One prepare's steps with the context they write; neither copied nor moved (the steps point
// into the context).
struct ClaimPlan {
  ClaimPlan() = default;
  ClaimPlan(const ClaimPlan&) = delete;
  ClaimPlan& operator=(const ClaimPlan&) = delete;

  ClaimContext context;
  prepare::PlanSteps steps;
};

// What DeviceState planned for one claim (no side effect yet).
struct ClaimStepsInput {
  std::string uid;
  std::string ref;  // "<namespace>/<name>", for errors
  std::vector<RecordedDevice> devices;
  // The domain of each channel device, by domain UID.
  std::map<std::string, std::shared_ptr<const k8s::ComputeDomain>> channel_domains;
};

// What an undo consults besides its record.
struct CdUndoEnv {
  const StepEnv* env = nullptr;
  std::string claim_uid;
};

using CdStepKind = prepare::StepKind<ClaimStepsInput, StepEnv, ClaimContext, CdUndoEnv>;

// The compute-domain plugin's kinds of step, in plan order (each kind over the claim's devices).
const std::vector<CdStepKind>& CdStepTable();

// CdStepTable as Markdown (prepare::StepTableMarkdown): what --help-steps-markdown prints.
std::string CdStepTableMarkdown();

// The plan: each kind's steps, in table order, as the claim needs them.
absl::Status PlanClaimSteps(const ClaimStepsInput& in, const StepEnv& env, ClaimPlan* plan);

// The undo of each step kind of claim `uid`, by name; `env` must outlive them.
prepare::StepUndoers ClaimUndoers(const StepEnv& env, const std::string& uid);

// `devices` with the CDI IDs the prepare wrote for them (a daemon device also gets the base
// spec's device).
std::vector<RecordedDevice> WithCdiIds(std::vector<RecordedDevice> devices,
                                       const ClaimContext& context);

// The steps of a record written without them, from its devices (applied when `completed`).
std::vector<prepare::StepRecord> LegacySteps(const std::vector<RecordedDevice>& devices,
                                             bool completed, bool host_managed);

// The claim's recorded steps; LegacySteps of `record` for an entry without (readable) ones.
std::vector<prepare::StepRecord> RecordedSteps(const checkpoint::PreparedClaim& claim,
                                               const ClaimRecord& record, bool host_managed);

}  // namespace dra::cdplugin
