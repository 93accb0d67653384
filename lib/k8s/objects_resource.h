#pragma once

// resource.k8s.io/v1 kinds: ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate.
//
// Modelled after k8s.io/api/resource/v1/types.go with the mapping rule of json_decode.h (Go
// pointer -> std::optional, Go value -> plain member omitted when zero). Sub-objects the DRA
// driver only passes through (node selectors, tolerations, request policies, opaque parameters,
// device status conditions/data) are raw JSON, null when unset. Fields we do not model at all
// round-trip through `unknown_fields`.
//
// Decoding validates JSON types only, plus one rule the driver relies on: a DeviceAttribute must
// hold exactly one value. API-server validation rules (limits, one-of constraints) are not
// re-checked.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/quantity.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// ---- Shared by several kinds ----

struct CelDeviceSelector {
  std::string expression;
  nlohmann::json unknown_fields;
};

struct DeviceSelector {
  std::optional<CelDeviceSelector> cel;
  nlohmann::json unknown_fields;
};

struct OpaqueDeviceConfiguration {
  std::string driver;
  nlohmann::json parameters;  // arbitrary JSON (RawExtension); always written, null as {}
  nlohmann::json unknown_fields;
};

// ---- ResourceSlice ----

struct ResourcePool {
  std::string name;
  int64_t generation = 0;            // always written
  int64_t resource_slice_count = 0;  // always written
  nlohmann::json unknown_fields;
};

// Exactly one of the value members is set: a scalar optional, or a non-empty list (the list forms
// need the DRAListTypeAttributes gate). Decoding rejects zero or several.
struct DeviceAttribute {
  std::optional<int64_t> int_value;          // JSON "int"
  std::optional<bool> bool_value;            // JSON "bool"
  std::optional<std::string> string_value;   // JSON "string"
  std::optional<std::string> version_value;  // JSON "version", semver 2.0.0
  std::vector<int64_t> int_values;           // JSON "ints"
  std::vector<bool> bool_values;             // JSON "bools"
  std::vector<std::string> string_values;    // JSON "strings"
  std::vector<std::string> version_values;   // JSON "versions"
  nlohmann::json unknown_fields;

  static DeviceAttribute Int(int64_t value);
  static DeviceAttribute Bool(bool value);
  static DeviceAttribute String(std::string value);
  static DeviceAttribute Version(std::string value);

  // How many value members are set (valid attributes have exactly one).
  int ValueCount() const;
};

struct DeviceCapacity {
  Quantity value;                 // always written
  nlohmann::json request_policy;  // CapacityRequestPolicy, raw; null when unset
  nlohmann::json unknown_fields;
};

struct Counter {
  Quantity value;
  nlohmann::json unknown_fields;
};

struct CounterSet {
  std::string name;
  std::map<std::string, Counter> counters;
  nlohmann::json unknown_fields;
};

struct DeviceCounterConsumption {
  std::string counter_set;  // JSON counterSet
  std::map<std::string, Counter> counters;
  nlohmann::json unknown_fields;
};

struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;                     // None | NoSchedule | NoExecute
  std::optional<std::string> time_added;  // set by the server when absent
  nlohmann::json unknown_fields;
};

struct Device {
  std::string name;
  std::map<std::string, DeviceAttribute> attributes;  // key: QualifiedName
  std::map<std::string, DeviceCapacity> capacity;
  std::vector<DeviceCounterConsumption> consumes_counters;
  // Per-device node selection, only with spec.perDeviceNodeSelection.
  std::optional<std::string> node_name;
  nlohmann::json node_selector;  // core/v1 NodeSelector, raw; null when unset
  std::optional<bool> all_nodes;
  std::vector<DeviceTaint> taints;
  std::optional<bool> binds_to_node;
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;
  std::optional<bool> allow_multiple_allocations;
  nlohmann::json unknown_fields;
};

struct ResourceSliceSpec {
  std::string driver;
  ResourcePool pool;
  // Exactly one of node_name, node_selector, all_nodes, per_device_node_selection.
  std::optional<std::string> node_name;
  nlohmann::json node_selector;  // core/v1 NodeSelector, raw; null when unset
  std::optional<bool> all_nodes;
  std::optional<bool> per_device_node_selection;
  std::vector<Device> devices;
  std::vector<CounterSet> shared_counters;
  nlohmann::json unknown_fields;
};

struct ResourceSlice {
  static constexpr ResourceInfo kResource{"resource.k8s.io", "v1", "ResourceSlice",
                                          "resourceslices", false};
  ObjectMeta metadata;
  ResourceSliceSpec spec;
  nlohmann::json raw;  // the whole object as last decoded; empty for objects built in code

  static absl::StatusOr<ResourceSlice> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// ---- DeviceClass ----

struct DeviceClassConfiguration {
  std::optional<OpaqueDeviceConfiguration> opaque;
  nlohmann::json unknown_fields;
};

struct DeviceClassSpec {
  std::vector<DeviceSelector> selectors;
  std::vector<DeviceClassConfiguration> config;
  std::optional<std::string> extended_resource_name;
  nlohmann::json unknown_fields;
};

struct DeviceClass {
  static constexpr ResourceInfo kResource{"resource.k8s.io", "v1", "DeviceClass", "deviceclasses",
                                          false};
  ObjectMeta metadata;
  DeviceClassSpec spec;
  nlohmann::json raw;

  static absl::StatusOr<DeviceClass> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// ---- ResourceClaim ----

struct CapacityRequirements {
  std::map<std::string, Quantity> requests;
  nlohmann::json unknown_fields;
};

struct ExactDeviceRequest {
  std::string device_class_name;  // always written
  std::vector<DeviceSelector> selectors;
  std::string allocation_mode;  // ExactCount (default) | All
  int64_t count = 0;            // 0: unset (the server defaults 1 for ExactCount)
  std::optional<bool> admin_access;
  nlohmann::json tolerations;  // []DeviceToleration, raw; null when unset
  std::optional<CapacityRequirements> capacity;
  nlohmann::json unknown_fields;
};

struct DeviceSubRequest {
  std::string name;
  std::string device_class_name;
  std::vector<DeviceSelector> selectors;
  std::string allocation_mode;
  int64_t count = 0;
  nlohmann::json tolerations;  // raw; null when unset
  std::optional<CapacityRequirements> capacity;
  nlohmann::json unknown_fields;
};

// One of `exactly` and `first_available` is set.
struct DeviceRequest {
  std::string name;
  std::optional<ExactDeviceRequest> exactly;
  std::vector<DeviceSubRequest> first_available;
  nlohmann::json unknown_fields;
};

struct DeviceConstraint {
  std::vector<std::string> requests;  // empty: all requests; "<request>/<subrequest>" allowed
  std::optional<std::string> match_attribute;
  std::optional<std::string> distinct_attribute;
  nlohmann::json unknown_fields;
};

struct DeviceClaimConfiguration {
  std::vector<std::string> requests;  // empty: all requests
  std::optional<OpaqueDeviceConfiguration> opaque;
  nlohmann::json unknown_fields;
};

struct DeviceClaim {
  std::vector<DeviceRequest> requests;
  std::vector<DeviceConstraint> constraints;
  std::vector<DeviceClaimConfiguration> config;
  nlohmann::json unknown_fields;
};

struct ResourceClaimSpec {
  DeviceClaim devices;  // always written
  nlohmann::json unknown_fields;
};

struct DeviceRequestAllocationResult {
  std::string request;  // "<request>" or "<request>/<subrequest>"
  std::string driver;
  std::string pool;
  std::string device;
  std::optional<bool> admin_access;
  nlohmann::json tolerations;  // raw; null when unset
  std::vector<std::string> binding_conditions;
  std::vector<std::string> binding_failure_conditions;
  std::optional<std::string> share_id;  // JSON shareID
  std::map<std::string, Quantity> consumed_capacity;
  nlohmann::json unknown_fields;
};

struct DeviceAllocationConfiguration {
  std::string source;  // FromClass | FromClaim
  std::vector<std::string> requests;
  std::optional<OpaqueDeviceConfiguration> opaque;
  nlohmann::json unknown_fields;
};

struct DeviceAllocationResult {
  std::vector<DeviceRequestAllocationResult> results;
  std::vector<DeviceAllocationConfiguration> config;
  nlohmann::json unknown_fields;
};

struct AllocationResult {
  DeviceAllocationResult devices;
  nlohmann::json node_selector;  // core/v1 NodeSelector, raw; null when unset
  std::optional<std::string> allocation_timestamp;
  nlohmann::json unknown_fields;
};

struct ResourceClaimConsumerReference {
  std::string api_group;  // "" for core
  std::string resource;   // "pods"
  std::string name;
  std::string uid;
  nlohmann::json unknown_fields;
};

struct AllocatedDeviceStatus {
  std::string driver;
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;
  nlohmann::json conditions;    // []metav1.Condition, raw; null when unset
  nlohmann::json data;          // raw; null when unset
  nlohmann::json network_data;  // JSON networkData, raw; null when unset
  nlohmann::json unknown_fields;
};

struct ResourceClaimStatus {
  std::optional<AllocationResult> allocation;
  std::vector<ResourceClaimConsumerReference> reserved_for;
  std::vector<AllocatedDeviceStatus> devices;
  nlohmann::json unknown_fields;
};

struct ResourceClaim {
  static constexpr ResourceInfo kResource{"resource.k8s.io", "v1", "ResourceClaim",
                                          "resourceclaims", true};
  ObjectMeta metadata;
  ResourceClaimSpec spec;
  ResourceClaimStatus status;
  nlohmann::json raw;

  static absl::StatusOr<ResourceClaim> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// ---- ResourceClaimTemplate ----

struct ResourceClaimTemplateSpec {
  ObjectMeta metadata;  // only labels and annotations are allowed by the server
  ResourceClaimSpec spec;
  nlohmann::json unknown_fields;
};

struct ResourceClaimTemplate {
  static constexpr ResourceInfo kResource{"resource.k8s.io", "v1", "ResourceClaimTemplate",
                                          "resourceclaimtemplates", true};
  ObjectMeta metadata;
  ResourceClaimTemplateSpec spec;
  nlohmann::json raw;

  static absl::StatusOr<ResourceClaimTemplate> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// ---- Element codecs shared by the files implementing the kinds above ----

absl::Status DecodeDeviceSelector(const nlohmann::json& j, const std::string& path,
                                  DeviceSelector* out);
nlohmann::json EncodeDeviceSelector(const DeviceSelector& selector);
absl::Status DecodeOpaqueDeviceConfiguration(const nlohmann::json& j, const std::string& path,
                                             OpaqueDeviceConfiguration* out);
nlohmann::json EncodeOpaqueDeviceConfiguration(const OpaqueDeviceConfiguration& opaque);

}  // namespace dra::k8s
