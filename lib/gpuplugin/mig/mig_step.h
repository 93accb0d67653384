#pragma once

// The migDevices step of a GPU claim's prepare (claim_steps.h), gate DynamicMIG: creates the
// claim's dynamic MIG devices (MigManager::Create) before the CDI spec names them.
//
// External and resumable: its record (written before Apply) lists every device it creates as
// {"device", "gpu", "profile", "profileId", "start", "size"}; after Apply each entry also has the
// MIG "uuid", "gi" and "ci" (in the record written at the next journal write, PrepareCompleted at
// the latest: before the kubelet learns of the device). A crash anywhere leaves a record whose
// Undo finds the instances by GPU, profile and placement alone, so nothing stays orphaned; a
// retried prepare repeats Apply, which finishes what exists (MigManager is idempotent).
// Undo: MigManager::Destroy for each entry, in reverse.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/gpuplugin/mig/mig_manager.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/prepare/plan.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

inline constexpr char kMigDevicesStep[] = "migDevices";

// Device name -> the MIG device as created (uuid and instance ids set).
using CreatedMigDevices = std::map<std::string, MigInfo>;

// The step for the dynamic MIG devices among `devices` (those whose mig->dynamic is set); null
// when there are none. Created devices are stored in `*created` (the plan's ClaimStepContext,
// claim_steps.h), which must outlive the step. Null `mig`: Apply fails (Internal).
std::unique_ptr<prepare::PlanStep> MigDevicesStep(const std::vector<RecordedDevice>& devices,
                                                  const MigManager* mig,
                                                  CreatedMigDevices* created);

// `devices` with the created MIG devices' uuid and instance ids filled in.
std::vector<RecordedDevice> WithCreatedMig(std::vector<RecordedDevice> devices,
                                           const CreatedMigDevices& created);

// The Undo of the step from its record. InvalidArgument naming the field for a malformed record;
// FailedPrecondition when there is something to destroy and `mig` is null.
absl::Status UndoMigDevices(const MigManager* mig, const nlohmann::json& undo);

}  // namespace dra::gpu
