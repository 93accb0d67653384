#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/common/json_access.h"
#include "lib/gpuplugin/mps/mps_daemon.h"
#include "lib/gpuplugin/prepare/fuzz_targets.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/gpuplugin/status/device_status.h"
#include "lib/gpuplugin/vfio/vfio_bind.h"
#include "lib/prepare/plan.h"

namespace dra::gpu::fuzz {
namespace {

[[noreturn]] void Violation(const char* what, const nlohmann::json& j) {
  std::fprintf(stderr, "fuzz invariant violated: %s: %s\n", what, j.dump().c_str());
  std::abort();
}

// decode(j) ok => encode, decode, encode gives the same JSON.
template <typename Decode, typename Encode>
void RoundTrip(const nlohmann::json& j, Decode decode, Encode encode, const char* what) {
  auto first = decode(j);
  if (!first.ok()) return;
  const nlohmann::json encoded = encode(*first);
  auto second = decode(encoded);
  if (!second.ok()) Violation(what, encoded);
  if (encode(*second) != encoded) Violation(what, encoded);
}

void MpsRecords(const nlohmann::json& j) {
  RoundTrip(j, MpsDaemonRecordFromJson, MpsDaemonRecordToJson, "MPS daemon record round trip");
}

void DeviceStatus(const nlohmann::json& j) {
  RoundTrip(j, StatusClaimRefFromJson, StatusClaimRefToJson, "status claim ref round trip");
  RoundTrip(
      j, DeviceStatusRecordFromJson,
      [](const DeviceStatusRecord& r) {
        return r.entries ? DeviceStatusRecordToJson(r.claim, *r.entries)
                         : StatusClaimRefToJson(r.claim);
      },
      "device status record round trip");
}

// The VFIO steps' undo data, validated by the vfioModule undoer alone (the others act on the host).
void VfioUndo(const nlohmann::json& j) {
  static const prepare::StepUndoers* const kUndoers = [] {
    auto* u = new prepare::StepUndoers();
    AddVfioUndoers(/*host=*/nullptr, *u);
    return u;
  }();
  (void)kUndoers->at(kVfioModuleStep)(j);
}

void Undo(const nlohmann::json& undo) {
  MpsRecords(undo);
  DeviceStatus(undo);
  VfioUndo(undo);
  if (undo.is_array()) {
    for (const nlohmann::json& e : undo) MpsRecords(e);
  }
}

}  // namespace

void CheckpointRecords(const uint8_t* data, size_t size) {
  absl::StatusOr<nlohmann::json> j =
      json_access::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!j.ok()) return;
  RoundTrip(*j, PreparedDevicesFromJson, PreparedDevicesToJson, "prepared devices round trip");
  RoundTrip(*j, prepare::StepRecordsFromJson, prepare::StepRecordsToJson,
            "step records round trip");
  if (absl::StatusOr<std::vector<prepare::StepRecord>> steps = prepare::StepRecordsFromJson(*j);
      steps.ok()) {
    for (const prepare::StepRecord& s : *steps) Undo(s.undo);
  }
  Undo(*j);
}

}  // namespace dra::gpu::fuzz
