#pragma once

// What prepare did for one claim, as recorded in the checkpoint (the opaque `prepared_devices`
// value of lib/checkpoint) so that unprepare can undo it without the ResourceClaim, which may be
// gone by then.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/mps/mps_daemon.h"
#include "lib/kubeletplugin/plugin_types.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

// One prepared device. JSON (PreparedDevicesToJson): {"requests", "pool", "device",
// "cdiDeviceIDs"} from `kubelet`, then the GPU facts below.
struct RecordedDevice {
  // What the driver reports to the kubelet for this device (GpuDriver returns it as it is):
  // request_names holds the allocation result's request ("req" or "req/sub"), device_name the
  // canonical device name. share_id is not recorded (this plugin reports none).
  kubeletplugin::PreparedDevice kubelet;
  DeviceType type = DeviceType::kGpu;
  std::string uuid;        // GPU UUID, or the MIG device's UUID
  unsigned int minor = 0;  // the GPU's minor (the parent's for MIG)
  std::string pci_bus_id;  // the GPU's (the parent's for MIG)
  std::optional<MigInfo> mig;
  bool admin_access = false;
  // Full GPUs only: whether prepare set (or, while the claim is PrepareStarted, may have set) a
  // time-slice on this GPU that unprepare must reset. Absent in records of plugins that did not
  // know time-slicing (JSON "timeSliceApplied" omitted); unprepare then resets while the gate
  // TimeSlicingSettings is on, as the Go driver does for a group without the field.
  std::optional<bool> time_slice_applied;
  // The MPS control daemon of the device's config group (the same record on every device of the
  // group), from PrepareStarted on: unprepare and rollback stop it. JSON "mpsDaemon", absent when
  // the device does not share through MPS.
  std::optional<MpsDaemonRecord> mps_daemon;

  friend bool operator==(const RecordedDevice&, const RecordedDevice&) = default;
};

nlohmann::json PreparedDevicesToJson(const std::vector<RecordedDevice>& devices);
absl::StatusOr<std::vector<RecordedDevice>> PreparedDevicesFromJson(const nlohmann::json& j);

// The CDI device name of a device in a claim: "<claimUID>-<device>".
std::string ClaimDeviceName(const std::string& claim_uid, const std::string& device);

}  // namespace dra::gpu
