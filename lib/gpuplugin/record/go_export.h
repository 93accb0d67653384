#pragma once

// The way back to the public Go driver: this node's prepared claims, from our checkpoint, written
// as the Go driver's checkpoint.json (the inverse of go_prepared.h), so that the public driver,
// installed after this plugin has stopped, keeps the running pods and later unprepares them.
//
// What is written (the format facts are in lib/checkpoint/go_format.h and
// docs/checkpoint-format.md "The public Go driver's checkpoint"): the three sections the newest Go
// driver itself writes, `{"checksum", "v1", "v2", "v3"}`, each in the Go structs' field order and
// with their omitempty rules, so that the Go driver's re-marshalling reproduces the bytes and its
// checksums verify:
//   - "v2" (what go_prepared.h reads, and Go drivers without "v3" use): per claim
//     {checkpointState, status: {allocation}, preparedDevices, name?, namespace?}, the devices with
//     the kubeletplugin.Device value D = {Requests, PoolName, DeviceName, CDIDeviceIDs}, and
//     "nodeBootID";
//   - "v1", regenerated from "v2" as the Go driver does (completed claims: {status,
//     preparedDevices});
//   - "v3" (Go drivers that have it verify and read only "v3"): the same claims, D as
//     {requests, poolName, deviceName, cdiDeviceIDs} with omitempty, no null members.
// Devices are grouped as the Go driver groups them, one group per config: consecutive devices
// with the same MPS daemon and, for full GPUs, the same time-slice flag share a group, whose
// configState carries "mpsControlDaemonID" (always present, "" for none, as the Go struct has no
// omitempty) and "timeSliceApplied" (left out when unknown). The claim's allocation is rendered
// in resource.k8s.io/v1's field order (fields the v1 types lack are dropped, as Go's decoder
// would drop them).
//
// Exportable are PrepareCompleted claims whose devices are full GPUs, static MIG devices and VFIO
// devices. A claim PrepareStarted (a prepare in progress, or one that failed part-way: the Go
// format records no devices for it, so the public driver could not undo what it set up) or with a
// DynamicMIG device (the Go record go_prepared.h reads has no dynamic MIG device, so the public
// driver would not destroy it) is refused: InvalidArgument naming the claim, and nothing written.

#include <string>

#include "absl/status/statusor.h"
#include "lib/checkpoint/format.h"

namespace dra::gpu {

// The Go checkpoint text for `contents` (our checkpoint, decoded). InvalidArgument naming the
// claim for a claim that cannot be exported (above) or whose devices do not decode.
absl::StatusOr<std::string> GoCheckpointText(const checkpoint::Contents& contents);

struct GoExportResult {
  size_t claims = 0;      // claims written
  std::string kept_ours;  // where our file's bytes were copied when `output` was our checkpoint
};

// Reads our checkpoint at `checkpoint_path` (never modifying it), and writes GoCheckpointText
// atomically (0644) to `output_path`. When `output_path` is `checkpoint_path` itself (the public
// driver reads the same path), our file's bytes are first copied to
// `<checkpoint_path>.cpp-driver-<unix seconds>` (".<n>" appended when taken), so that nothing is
// lost. Errors: NotFound when there is no checkpoint; DataLoss when ours is corrupt;
// FailedPrecondition when it is already the Go driver's format or of a newer version;
// InvalidArgument from GoCheckpointText. On any error nothing is written.
absl::StatusOr<GoExportResult> ExportGoCheckpoint(const std::string& checkpoint_path,
                                                  const std::string& output_path);

// OK unless a plugin serves from `plugin_dir`: FailedPrecondition naming the first DRA socket
// ("dra*.sock") that accepts a connection. A running plugin must not have the Go file written over
// its checkpoint: its next read of the checkpoint (at the latest when it stops) would adopt the
// file back into our format. A socket file left by a plugin that is gone refuses connections and
// does not count.
absl::Status CheckNoPluginServing(const std::string& plugin_dir);

}  // namespace dra::gpu
