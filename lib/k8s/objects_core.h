#pragma once

// core/v1 kinds the driver reads or writes: Node, Pod, Event. Only the fields the driver needs are
// typed; everything else round-trips through `raw` / `unknown_fields` (see json_decode.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// ---- Node ----

struct NodeCondition {
  std::string type;    // "Ready", ...
  std::string status;  // "True" | "False" | "Unknown"
  std::string reason;
  std::string message;
  nlohmann::json unknown_fields;  // lastHeartbeatTime, lastTransitionTime
};

struct NodeSpec {
  bool unschedulable = false;
  nlohmann::json unknown_fields;  // providerID, taints, podCIDR, ...
};

struct NodeSystemInfo {
  std::string boot_id;  // JSON bootID; changes on every reboot
  nlohmann::json unknown_fields;
};

struct NodeStatus {
  std::vector<NodeCondition> conditions;
  NodeSystemInfo node_info;
  nlohmann::json unknown_fields;
};

struct Node {
  static constexpr ResourceInfo kResource{"", "v1", "Node", "nodes", false};
  ObjectMeta metadata;
  NodeSpec spec;
  NodeStatus status;
  nlohmann::json raw;  // the whole object as last decoded; empty for objects built in code

  static absl::StatusOr<Node> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// ---- Pod ----

// pod.spec.resourceClaims[]: exactly one of the two sources is set.
struct PodResourceClaim {
  std::string name;
  std::optional<std::string> resource_claim_name;
  std::optional<std::string> resource_claim_template_name;
  nlohmann::json unknown_fields;
};

// container.resources.claims[]
struct ContainerResourceClaim {
  std::string name;     // a pod.spec.resourceClaims[].name
  std::string request;  // optional: one request of that claim
  nlohmann::json unknown_fields;
};

struct ContainerResources {
  std::vector<ContainerResourceClaim> claims;
  nlohmann::json unknown_fields;  // limits, requests
};

struct Container {
  std::string name;
  std::string image;
  ContainerResources resources;
  nlohmann::json unknown_fields;  // command, env, ...
};

struct PodSpec {
  std::string node_name;
  std::vector<PodResourceClaim> resource_claims;
  std::vector<Container> init_containers;
  std::vector<Container> containers;
  nlohmann::json unknown_fields;
};

// pod.status.resourceClaimStatuses[]: an unset resource_claim_name means no claim was needed.
struct PodResourceClaimStatus {
  std::string name;
  std::optional<std::string> resource_claim_name;
  nlohmann::json unknown_fields;
};

struct PodStatus {
  std::string phase;  // Pending | Running | Succeeded | Failed | Unknown
  std::vector<PodResourceClaimStatus> resource_claim_statuses;
  nlohmann::json unknown_fields;
};

struct Pod {
  static constexpr ResourceInfo kResource{"", "v1", "Pod", "pods", true};
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;
  nlohmann::json raw;

  static absl::StatusOr<Pod> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// ---- Event (core/v1) ----

struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string namespace_name;  // JSON "namespace"
  std::string uid;
  nlohmann::json unknown_fields;  // resourceVersion, fieldPath
};

struct EventSource {
  std::string component;
  std::string host;
  nlohmann::json unknown_fields;
};

struct Event {
  static constexpr ResourceInfo kResource{"", "v1", "Event", "events", true};
  ObjectMeta metadata;
  ObjectReference involved_object;
  std::string reason;
  std::string message;
  std::string type;  // "Normal" | "Warning"
  EventSource source;
  std::string reporting_component;  // JSON reportingComponent
  std::string reporting_instance;
  std::string first_timestamp;  // RFC 3339
  std::string last_timestamp;
  int32_t count = 0;
  nlohmann::json raw;

  static absl::StatusOr<Event> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

}  // namespace dra::k8s
