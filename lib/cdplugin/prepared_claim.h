#pragma once

// What the checkpoint (lib/checkpoint, <data dir>/checkpoint.json) records per claim for this
// plugin: the checkpoint's own state (PrepareStarted / PrepareCompleted) plus, in its opaque
// "preparedDevices" member,
//
//   {"phase": "PrepareStarted" | "PrepareCompleted" | "PrepareAborted",
//    "abortedAt": "<RFC 3339>",                       (PrepareAborted only)
//    "devices": [{"request": "...", "pool": "...", "device": "channel-0", "type": "channel",
//                 "id": 0, "domainID": "<cdUID>", "allocationMode": "All",
//                 "cdiDeviceIDs": ["..."]}, ...]}
//
// The state machine (docs/compute-domains.md "Checkpoint"):
//   (none) --prepare begins--> PrepareStarted --prepare ends--> PrepareCompleted
//   PrepareCompleted --unprepare--> (none)
//   PrepareStarted --unprepare / the cleanup finds the claim gone--> PrepareAborted
//   PrepareAborted --a prepare of the same allocation--> permanent error ("stale prepare")
//   PrepareAborted --a prepare of another allocation--> PrepareStarted
//   PrepareAborted --90 s later, the cleanup--> (none)
// An aborted claim is stored with the checkpoint state PrepareStarted (the library knows only
// two) and the phase PrepareAborted; readers go by the phase.
//
// Beside it, the entry's "steps" member holds the prepare engine's record of the claim's steps
// (claim_steps.h; absent in entries written before steps were recorded).
//
// The devices are recorded at PrepareStarted already (from the configs, without CDI IDs), so an
// unprepare of a half-prepared claim knows which node label to remove.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/cdplugin/claim_configs.h"
#include "lib/checkpoint/format.h"
#include "lib/kubeletplugin/plugin_types.h"
#include "nlohmann/json.hpp"

namespace dra::cdplugin {

enum class Phase { kStarted, kCompleted, kAborted };
const char* PhaseName(Phase phase);

// One device of the claim. JSON: "request", "pool", "device" and "cdiDeviceIDs" from `kubelet`, the
// others from the members below.
struct RecordedDevice {
  // What the driver reports to the kubelet for this device (DeviceState::Prepare returns it as it
  // is): request_names holds the allocation result's one request (JSON "request"). share_id is
  // not recorded (this plugin reports none).
  kubeletplugin::PreparedDevice kubelet;
  DeviceType type = DeviceType::kChannel;
  int id = 0;
  std::string domain_id;
  std::string allocation_mode;  // channels only

  friend bool operator==(const RecordedDevice&, const RecordedDevice&) = default;
};

struct ClaimRecord {
  Phase phase = Phase::kStarted;
  absl::Time aborted_at = absl::InfinitePast();
  std::vector<RecordedDevice> devices;

  friend bool operator==(const ClaimRecord&, const ClaimRecord&) = default;
};

RecordedDevice RecordDevice(const ConfiguredDevice& d, const std::string& pool);

nlohmann::json EncodeRecord(const ClaimRecord& record);
// Decodes a claim's record; `claim` supplies the checkpoint state for entries without a phase.
absl::StatusOr<ClaimRecord> DecodeRecord(const checkpoint::PreparedClaim& claim);

// The checkpoint entry for a record (state from the phase: PrepareCompleted or PrepareStarted).
checkpoint::PreparedClaim ToCheckpoint(const ClaimRecord& record, const std::string& uid,
                                       const std::string& ns, const std::string& name,
                                       const nlohmann::json& allocation);

}  // namespace dra::cdplugin
