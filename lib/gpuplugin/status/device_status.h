#pragma once

// Device status on claims (KEP-4817, ResourceClaim status.devices): at prepare the plugin writes,
// for each device of its driver in the claim's allocation, an entry keyed by driver, pool, device
// (and shareID) with a `data` object naming the physical device and a `Ready` condition, so that
// `kubectl get resourceclaim -o yaml` shows which GPU a pod got. Unprepare removes the entries.
//
// The writes are server-side applies to the claim's status subresource under a field manager of
// this driver on this node (DeviceStatusFieldManager): the API server merges the list by its key,
// so entries of other drivers (and of this driver on other nodes) stay untouched, and applying an
// empty list under the same manager removes exactly what this manager wrote.
//
// `data` (free-form, <= 10 KiB):
//   full GPU: {"uuid": "GPU-...", "productName": "NVIDIA H100 80GB HBM3"}
//   MIG:      {"uuid": "MIG-...", "productName": ..., "parentUUID": "GPU-...", "profile":
//   "1g.10gb"}
//
// Best effort (docs/prepare-flow.md "Device status"): the entries are informational, so a failed
// write does not fail the prepare (a warning and nvidia_dra_device_status_writes_total{result=
// "error"}); the step is recorded before the write all the same, so unprepare removes whatever
// reached the server.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/k8s/client.h"
#include "lib/metrics/metrics.h"
#include "nlohmann/json.hpp"

namespace dra::gpu {

// The claim whose status is written: the write goes to this incarnation only (metadata.uid).
struct StatusClaimRef {
  std::string namespace_name;
  std::string name;
  std::string uid;
  int64_t generation = 0;  // the Ready condition's observedGeneration; 0: left out

  friend bool operator==(const StatusClaimRef&, const StatusClaimRef&) = default;
};

// One status.devices entry of this driver.
struct DeviceStatusEntry {
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;  // the allocation result's shareID (consumable shares)
  nlohmann::json data;                  // DeviceStatusData

  friend bool operator==(const DeviceStatusEntry&, const DeviceStatusEntry&) = default;
};

// The `data` of `device` (above).
nlohmann::json DeviceStatusData(const AllocatableDevice& device);

// "<driver>/<node>", cut to the API server's 128 characters.
std::string DeviceStatusFieldManager(const std::string& driver, const std::string& node);

// The server-side apply body that sets exactly `entries` as this manager's status.devices of
// `claim` (empty: removes them). Each entry gets one condition {type Ready, status True, reason
// DevicePrepared, message, lastTransitionTime `now`, observedGeneration when known}.
nlohmann::json DeviceStatusApplyBody(const std::string& driver, const StatusClaimRef& claim,
                                     const std::vector<DeviceStatusEntry>& entries, absl::Time now);

// The undo data of the deviceStatus step ({"namespace", "name", "uid"}) and back.
nlohmann::json StatusClaimRefToJson(const StatusClaimRef& claim);
absl::StatusOr<StatusClaimRef> StatusClaimRefFromJson(const nlohmann::json& j);

// The deviceStatus step's undo data since the writes are queued (device_status_queue.h): the
// claim ref above plus "generation" and "devices" (the entries, each {"pool", "device",
// "shareID" when set, "data"}), so that a restart can write the entries of a prepared claim
// again when the queued write was lost.
nlohmann::json DeviceStatusRecordToJson(const StatusClaimRef& claim,
                                        const std::vector<DeviceStatusEntry>& entries);
struct DeviceStatusRecord {
  StatusClaimRef claim;
  // Unset in records written before the entries were recorded.
  std::optional<std::vector<DeviceStatusEntry>> entries;
};
absl::StatusOr<DeviceStatusRecord> DeviceStatusRecordFromJson(const nlohmann::json& j);

// The most one write may take (the plugin's status client's request timeout, no retries): the
// deviceStatus step skips the write when less is left of the prepare's deadline.
inline constexpr absl::Duration kDeviceStatusWriteTime = absl::Seconds(5);

// Writes and removes a claim's status.devices entries of one driver on one node.
class DeviceStatusWriter {
 public:
  virtual ~DeviceStatusWriter() = default;
  // Sets this writer's entries of `claim` to `entries`.
  virtual absl::Status Write(const StatusClaimRef& claim,
                             const std::vector<DeviceStatusEntry>& entries) const = 0;
  // Removes this writer's entries. OK when the claim is gone, is another incarnation (another
  // uid), or holds no entry of this driver.
  virtual absl::Status Remove(const StatusClaimRef& claim) const = 0;
};

// Through `client`, whose field manager must be DeviceStatusFieldManager(driver, node) (the
// manager that wrote is the one whose apply removes). `writes` (may be null): counter family
// nvidia_dra_device_status_writes_total with labels {operation (write|remove), result (success|
// error)}. `client` and `writes` must outlive the result.
std::unique_ptr<DeviceStatusWriter> DeviceStatusWriterFromClient(
    k8s::Client* client, std::string driver, metrics::Family<metrics::Counter>* writes = nullptr);

// The counter family above, registered in `registry`.
metrics::Family<metrics::Counter>* AddDeviceStatusWritesMetric(metrics::Registry* registry);

}  // namespace dra::gpu
