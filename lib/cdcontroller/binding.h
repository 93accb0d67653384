#pragma once

// Device binding conditions of ComputeDomain channels (KEP-5007; docs/compute-domains.md
// "Binding conditions"). The kubelet plugin publishes channel-0 with the binding condition
// IMEXDaemonReady and the failure condition IMEXDaemonFailed; the scheduler copies them into the
// claim's allocation result and holds the pod in PreBind until the claim's status.devices entry
// of that device has IMEXDaemonReady True (or IMEXDaemonFailed True, which makes it deallocate
// the claim and schedule the pod again). The controller reads the claims and writes those
// conditions; the pieces here are the pure part of that: reading a claim, and the server-side
// apply body of its status.

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "lib/k8s/objects_resource.h"
#include "nlohmann/json.hpp"

namespace dra::cdcontroller {

// One allocated compute-domain.nvidia.com device of a claim whose allocation result carries
// binding conditions.
struct BindingDevice {
  enum class State { kPending, kReady, kFailed };

  std::string pool;
  std::string device;
  std::string node;  // the allocation's node (its node selector), else the pool (the node name)
  std::vector<std::string> conditions;
  std::vector<std::string> failure_conditions;
  State state = State::kPending;
  // The entry's conditions as the claim's status holds them (null when there is no entry).
  nlohmann::json reported_conditions;
};

struct BindingClaim {
  // The domainID of the allocation's ComputeDomainChannelConfig; empty when it has none.
  std::string domain_uid;
  std::vector<BindingDevice> devices;
};

// The claim's compute-domain.nvidia.com devices that carry binding conditions, with what its
// status reports for each; nullopt when it is not allocated or has no such device.
std::optional<BindingClaim> BindingClaimOf(const k8s::ResourceClaim& claim);

// Whether the claim has an allocated compute-domain.nvidia.com channel device without binding
// conditions (allocated by a scheduler or stored by an API server without
// DRADeviceBindingConditions, or published by a plugin with binding conditions off).
bool HasChannelWithoutBindingConditions(const k8s::ResourceClaim& claim);

// The node name of an allocation: the value of a matchFields metadata.name term of its node
// selector (what the scheduler writes for a node-local slice); empty when there is none.
std::string AllocationNode(const k8s::AllocationResult& allocation);

// What the controller reports for one device: Ready (the binding condition True) or failed (the
// failure condition True, with `reason`).
struct BindingReport {
  std::string pool;
  std::string device;
  bool ready = false;
  std::string reason;   // CamelCase; for a failure, why the daemon cannot become Ready
  std::string message;  // for people
  // When set, the conditions to write as they are (an entry reported before, kept unchanged).
  nlohmann::json keep_conditions;
};

// The field manager of these status writes (its own, so that a server-side apply of the
// controller's entries never touches the plugins' or another writer's).
inline constexpr char kBindingFieldManager[] = "compute-domain-controller/binding-conditions";

// The server-side apply body that sets exactly `reports` as this manager's status.devices entries
// of `claim` (driver compute-domain.nvidia.com), guarded by the claim's UID. A ready report gets
// {type IMEXDaemonReady, status True}, a failed one {type IMEXDaemonFailed, status True}, each
// with reason, message, lastTransitionTime `now` and the claim's generation.
nlohmann::json BindingStatusApplyBody(const k8s::ResourceClaim& claim,
                                      const std::vector<BindingReport>& reports, absl::Time now);

}  // namespace dra::cdcontroller
