#pragma once

// The public Go driver's record of a prepared claim's devices, converted into ours (prepared.h),
// so that a node switched from the Go driver adopts its checkpoint (lib/checkpoint/checkpoint.h,
// steps A1-A5) and later unprepares those claims as if this plugin had prepared them.
//
// The Go record is a list of groups, one per config:
//   {"devices": [{"gpu": {"info": {"uuid"}, "device": D} | null,
//                 "mig": {"concrete": {"parentMinor", "giId", "ciId", "migUUID", "parentUUID",
//                                      "parentPCIBusID"?}, "device": D} | null,
//                 "vfio"?: {"info": {"uuid", "pciBusID"?}, "device": D}}, ...],
//    "configState": {"mpsControlDaemonID"?, "mpsApplied"?, "timeSliceApplied"?}}
// with D = {"Requests", "PoolName", "DeviceName", "CDIDeviceIDs", "ShareID"?, "Metadata"?}.
//
// What the Go record lacks is filled in from this node's inventory (the device of the same
// name): the GPU's minor and PCI bus ID, a MIG device's profile and placement; failing that, from
// the canonical device name (minor, GI profile id, placement start). Admin access comes from the
// claim's allocation. Per group: "timeSliceApplied" goes to every full GPU of the group (absent
// stays absent, which unprepare treats as the Go driver does); "mpsControlDaemonID" becomes an MPS
// daemon record in `mps_namespace` (the Go driver ran its daemons in its --namespace, as we do)
// over the group's full GPUs, so that unprepare stops the daemon and resets their compute mode.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/record/prepared.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

// Converts one claim's Go device groups. `allocation` is the claim's status.allocation (null when
// unknown). InvalidArgument, naming the element, for a record of the wrong shape.
absl::StatusOr<std::vector<RecordedDevice>> PreparedDevicesFromGo(const nlohmann::json& groups,
                                                                  const nlohmann::json& allocation,
                                                                  const Inventory& inventory,
                                                                  const std::string& mps_namespace);

// The checkpoint's converter (CheckpointOptions::convert_go_devices): PreparedDevicesFromGo, then
// PreparedDevicesToJson. Keeps its own copy of `inventory`.
checkpoint::GoDevicesConverter GoDevicesConverter(Inventory inventory, std::string mps_namespace);

}  // namespace dra::gpu
