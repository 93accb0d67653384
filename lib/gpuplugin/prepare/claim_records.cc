// What a claim's checkpoint entry records of its steps (claim_steps.h): the records of a
// completed plan, and the steps of an entry written with none.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/common/log.h"
#include "lib/gpuplugin/prepare/claim_steps.h"  // declares what this file defines

namespace dra::gpu {

using checkpoint::ClaimState;

std::vector<prepare::StepRecord> AppliedRecords(const prepare::PlanSteps& steps) {
  std::vector<prepare::StepRecord> out;
  for (const auto& s : steps)
    out.push_back({s->name(), prepare::StepState::kApplied, s->UndoData()});
  return out;
}

std::vector<prepare::StepRecord> LegacySteps(const std::vector<RecordedDevice>& devices,
                                             bool completed, bool time_slicing_gate) {
  const prepare::StepState state =
      completed ? prepare::StepState::kApplied : prepare::StepState::kBegun;
  std::vector<std::string> gpus;
  std::set<std::string> seen_gpus, seen_daemons;
  nlohmann::json daemons = nlohmann::json::array();
  for (const RecordedDevice& d : devices) {
    // Explicitly false: never touched. Absent: a record from before time-slicing; reset while
    // the gate is on, as the Go driver does.
    if (d.type == DeviceType::kGpu && d.time_slice_applied.value_or(time_slicing_gate) &&
        seen_gpus.insert(d.uuid).second) {
      gpus.push_back(d.uuid);
    }
    if (d.mps_daemon && seen_daemons.insert(d.mps_daemon->id).second) {
      daemons.push_back(MpsDaemonRecordToJson(*d.mps_daemon));
    }
  }
  std::vector<prepare::StepRecord> out;
  if (!gpus.empty()) {
    out.push_back({kTimeSlicingStep, state, nlohmann::json::array({{{"gpus", gpus}}})});
  }
  if (!daemons.empty()) out.push_back({kMpsDaemonsStep, state, daemons});
  out.push_back({kCdiSpecStep, state, nullptr});
  return out;
}

std::vector<prepare::StepRecord> RecordedSteps(const checkpoint::PreparedClaim& claim,
                                               bool time_slicing_gate) {
  if (auto steps = prepare::RecordedStepsOrNone(claim.steps, claim.uid)) return *std::move(steps);
  absl::StatusOr<std::vector<RecordedDevice>> devices =
      PreparedDevicesFromJson(claim.prepared_devices);
  if (!devices.ok()) {
    DRA_WARNING("unreadable device record; no device teardown", "claim", claim.uid, "err",
                devices.status());
    return LegacySteps({}, claim.state == ClaimState::kPrepareCompleted, time_slicing_gate);
  }
  return LegacySteps(*devices, claim.state == ClaimState::kPrepareCompleted, time_slicing_gate);
}

}  // namespace dra::gpu
