// ResourceClaim and ResourceClaimTemplate (declared in objects_resource.h).

#include <utility>

#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"
#include "lib/k8s/objects_resource.h"

namespace dra::k8s {
namespace {

// ---- spec ----

absl::Status DecodeCapacityRequirements(const nlohmann::json& j, const std::string& path,
                                        CapacityRequirements* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.QuantityMap("requests", &out->requests));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

void PutCapacityRequirements(nlohmann::json& obj, const std::optional<CapacityRequirements>& c) {
  if (!c.has_value()) {
    obj.erase("capacity");
    return;
  }
  nlohmann::json out = StartObject(c->unknown_fields);
  PutQuantityMap(out, "requests", c->requests);
  obj["capacity"] = std::move(out);
}

absl::Status DecodeExactDeviceRequest(const nlohmann::json& j, const std::string& path,
                                      ExactDeviceRequest* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("deviceClassName", &out->device_class_name));
  RETURN_IF_ERROR(r.List("selectors", &out->selectors, DecodeDeviceSelector));
  RETURN_IF_ERROR(r.String("allocationMode", &out->allocation_mode));
  RETURN_IF_ERROR(r.Int64("count", &out->count));
  RETURN_IF_ERROR(r.OptionalBool("adminAccess", &out->admin_access));
  RETURN_IF_ERROR(r.Raw("tolerations", &out->tolerations));
  RETURN_IF_ERROR(r.Optional("capacity", &out->capacity, DecodeCapacityRequirements));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeExactDeviceRequest(const ExactDeviceRequest& e) {
  nlohmann::json out = StartObject(e.unknown_fields);
  out["deviceClassName"] = e.device_class_name;
  PutList(out, "selectors", e.selectors, EncodeDeviceSelector);
  PutString(out, "allocationMode", e.allocation_mode);
  PutInt64(out, "count", e.count);
  PutOptionalBool(out, "adminAccess", e.admin_access);
  PutRaw(out, "tolerations", e.tolerations);
  PutCapacityRequirements(out, e.capacity);
  return out;
}

absl::Status DecodeDeviceSubRequest(const nlohmann::json& j, const std::string& path,
                                    DeviceSubRequest* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("deviceClassName", &out->device_class_name));
  RETURN_IF_ERROR(r.List("selectors", &out->selectors, DecodeDeviceSelector));
  RETURN_IF_ERROR(r.String("allocationMode", &out->allocation_mode));
  RETURN_IF_ERROR(r.Int64("count", &out->count));
  RETURN_IF_ERROR(r.Raw("tolerations", &out->tolerations));
  RETURN_IF_ERROR(r.Optional("capacity", &out->capacity, DecodeCapacityRequirements));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceSubRequest(const DeviceSubRequest& s) {
  nlohmann::json out = StartObject(s.unknown_fields);
  out["name"] = s.name;
  out["deviceClassName"] = s.device_class_name;
  PutList(out, "selectors", s.selectors, EncodeDeviceSelector);
  PutString(out, "allocationMode", s.allocation_mode);
  PutInt64(out, "count", s.count);
  PutRaw(out, "tolerations", s.tolerations);
  PutCapacityRequirements(out, s.capacity);
  return out;
}

absl::Status DecodeDeviceRequest(const nlohmann::json& j, const std::string& path,
                                 DeviceRequest* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.Optional("exactly", &out->exactly, DecodeExactDeviceRequest));
  RETURN_IF_ERROR(r.List("firstAvailable", &out->first_available, DecodeDeviceSubRequest));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceRequest(const DeviceRequest& request) {
  nlohmann::json out = StartObject(request.unknown_fields);
  out["name"] = request.name;
  if (request.exactly.has_value()) {
    out["exactly"] = EncodeExactDeviceRequest(*request.exactly);
  } else {
    out.erase("exactly");
  }
  PutList(out, "firstAvailable", request.first_available, EncodeDeviceSubRequest);
  return out;
}

absl::Status DecodeDeviceConstraint(const nlohmann::json& j, const std::string& path,
                                    DeviceConstraint* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.StringList("requests", &out->requests));
  RETURN_IF_ERROR(r.OptionalString("matchAttribute", &out->match_attribute));
  RETURN_IF_ERROR(r.OptionalString("distinctAttribute", &out->distinct_attribute));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceConstraint(const DeviceConstraint& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  PutStringList(out, "requests", c.requests);
  PutOptionalString(out, "matchAttribute", c.match_attribute);
  PutOptionalString(out, "distinctAttribute", c.distinct_attribute);
  return out;
}

// DeviceClaimConfiguration and DeviceAllocationConfiguration embed DeviceConfiguration inline:
// {"requests": [...], "opaque": {...}} (+ "source" for the allocation one).
template <typename T>
absl::Status DecodeRequestsAndOpaque(ObjectReader& r, T* out) {
  RETURN_IF_ERROR(r.StringList("requests", &out->requests));
  return r.Optional("opaque", &out->opaque, DecodeOpaqueDeviceConfiguration);
}

template <typename T>
void PutRequestsAndOpaque(nlohmann::json& obj, const T& config) {
  PutStringList(obj, "requests", config.requests);
  if (config.opaque.has_value()) {
    obj["opaque"] = EncodeOpaqueDeviceConfiguration(*config.opaque);
  } else {
    obj.erase("opaque");
  }
}

absl::Status DecodeDeviceClaimConfiguration(const nlohmann::json& j, const std::string& path,
                                            DeviceClaimConfiguration* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(DecodeRequestsAndOpaque(r, out));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceClaimConfiguration(const DeviceClaimConfiguration& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  PutRequestsAndOpaque(out, c);
  return out;
}

absl::Status DecodeDeviceClaim(const nlohmann::json& j, const std::string& path, DeviceClaim* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.List("requests", &out->requests, DecodeDeviceRequest));
  RETURN_IF_ERROR(r.List("constraints", &out->constraints, DecodeDeviceConstraint));
  RETURN_IF_ERROR(r.List("config", &out->config, DecodeDeviceClaimConfiguration));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeResourceClaimSpec(const nlohmann::json& j, const std::string& path,
                                     ResourceClaimSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Field("devices", &out->devices, DecodeDeviceClaim));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeResourceClaimSpec(const ResourceClaimSpec& spec) {
  nlohmann::json out = StartObject(spec.unknown_fields);
  nlohmann::json devices = StartObject(spec.devices.unknown_fields);
  PutList(devices, "requests", spec.devices.requests, EncodeDeviceRequest);
  PutList(devices, "constraints", spec.devices.constraints, EncodeDeviceConstraint);
  PutList(devices, "config", spec.devices.config, EncodeDeviceClaimConfiguration);
  out["devices"] = std::move(devices);
  return out;
}

// ---- status ----

absl::Status DecodeDeviceRequestAllocationResult(const nlohmann::json& j, const std::string& path,
                                                 DeviceRequestAllocationResult* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("request", &out->request));
  RETURN_IF_ERROR(r.String("driver", &out->driver));
  RETURN_IF_ERROR(r.String("pool", &out->pool));
  RETURN_IF_ERROR(r.String("device", &out->device));
  RETURN_IF_ERROR(r.OptionalBool("adminAccess", &out->admin_access));
  RETURN_IF_ERROR(r.Raw("tolerations", &out->tolerations));
  RETURN_IF_ERROR(r.StringList("bindingConditions", &out->binding_conditions));
  RETURN_IF_ERROR(r.StringList("bindingFailureConditions", &out->binding_failure_conditions));
  RETURN_IF_ERROR(r.OptionalString("shareID", &out->share_id));
  RETURN_IF_ERROR(r.QuantityMap("consumedCapacity", &out->consumed_capacity));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceRequestAllocationResult(const DeviceRequestAllocationResult& result) {
  nlohmann::json out = StartObject(result.unknown_fields);
  out["request"] = result.request;
  out["driver"] = result.driver;
  out["pool"] = result.pool;
  out["device"] = result.device;
  PutOptionalBool(out, "adminAccess", result.admin_access);
  PutRaw(out, "tolerations", result.tolerations);
  PutStringList(out, "bindingConditions", result.binding_conditions);
  PutStringList(out, "bindingFailureConditions", result.binding_failure_conditions);
  PutOptionalString(out, "shareID", result.share_id);
  PutQuantityMap(out, "consumedCapacity", result.consumed_capacity);
  return out;
}

absl::Status DecodeDeviceAllocationConfiguration(const nlohmann::json& j, const std::string& path,
                                                 DeviceAllocationConfiguration* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("source", &out->source));
  RETURN_IF_ERROR(DecodeRequestsAndOpaque(r, out));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceAllocationConfiguration(const DeviceAllocationConfiguration& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["source"] = c.source;
  PutRequestsAndOpaque(out, c);
  return out;
}

absl::Status DecodeDeviceAllocationResult(const nlohmann::json& j, const std::string& path,
                                          DeviceAllocationResult* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.List("results", &out->results, DecodeDeviceRequestAllocationResult));
  RETURN_IF_ERROR(r.List("config", &out->config, DecodeDeviceAllocationConfiguration));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeAllocationResult(const nlohmann::json& j, const std::string& path,
                                    AllocationResult* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Field("devices", &out->devices, DecodeDeviceAllocationResult));
  RETURN_IF_ERROR(r.Raw("nodeSelector", &out->node_selector));
  RETURN_IF_ERROR(r.OptionalString("allocationTimestamp", &out->allocation_timestamp));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeAllocationResult(const AllocationResult& allocation) {
  nlohmann::json out = StartObject(allocation.unknown_fields);
  nlohmann::json devices = StartObject(allocation.devices.unknown_fields);
  PutList(devices, "results", allocation.devices.results, EncodeDeviceRequestAllocationResult);
  PutList(devices, "config", allocation.devices.config, EncodeDeviceAllocationConfiguration);
  PutObject(out, "devices", std::move(devices));
  PutRaw(out, "nodeSelector", allocation.node_selector);
  PutOptionalString(out, "allocationTimestamp", allocation.allocation_timestamp);
  return out;
}

absl::Status DecodeConsumerReference(const nlohmann::json& j, const std::string& path,
                                     ResourceClaimConsumerReference* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("apiGroup", &out->api_group));
  RETURN_IF_ERROR(r.String("resource", &out->resource));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("uid", &out->uid));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeConsumerReference(const ResourceClaimConsumerReference& ref) {
  nlohmann::json out = StartObject(ref.unknown_fields);
  PutString(out, "apiGroup", ref.api_group);
  out["resource"] = ref.resource;
  out["name"] = ref.name;
  out["uid"] = ref.uid;
  return out;
}

absl::Status DecodeAllocatedDeviceStatus(const nlohmann::json& j, const std::string& path,
                                         AllocatedDeviceStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("driver", &out->driver));
  RETURN_IF_ERROR(r.String("pool", &out->pool));
  RETURN_IF_ERROR(r.String("device", &out->device));
  RETURN_IF_ERROR(r.OptionalString("shareID", &out->share_id));
  RETURN_IF_ERROR(r.Raw("conditions", &out->conditions));
  RETURN_IF_ERROR(r.Raw("data", &out->data));
  RETURN_IF_ERROR(r.Raw("networkData", &out->network_data));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeAllocatedDeviceStatus(const AllocatedDeviceStatus& s) {
  nlohmann::json out = StartObject(s.unknown_fields);
  out["driver"] = s.driver;
  out["pool"] = s.pool;
  out["device"] = s.device;
  PutOptionalString(out, "shareID", s.share_id);
  PutRaw(out, "conditions", s.conditions);
  PutRaw(out, "data", s.data);
  PutRaw(out, "networkData", s.network_data);
  return out;
}

absl::Status DecodeResourceClaimStatus(const nlohmann::json& j, const std::string& path,
                                       ResourceClaimStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Optional("allocation", &out->allocation, DecodeAllocationResult));
  RETURN_IF_ERROR(r.List("reservedFor", &out->reserved_for, DecodeConsumerReference));
  RETURN_IF_ERROR(r.List("devices", &out->devices, DecodeAllocatedDeviceStatus));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeResourceClaimStatus(const ResourceClaimStatus& status) {
  nlohmann::json out = StartObject(status.unknown_fields);
  if (status.allocation.has_value()) {
    out["allocation"] = EncodeAllocationResult(*status.allocation);
  } else {
    out.erase("allocation");
  }
  PutList(out, "reservedFor", status.reserved_for, EncodeConsumerReference);
  PutList(out, "devices", status.devices, EncodeAllocatedDeviceStatus);
  return out;
}

// ---- template ----

absl::Status DecodeResourceClaimTemplateSpec(const nlohmann::json& j, const std::string& path,
                                             ResourceClaimTemplateSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Field("metadata", &out->metadata, DecodeObjectMeta));
  RETURN_IF_ERROR(r.Field("spec", &out->spec, DecodeResourceClaimSpec));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResourceClaim> ResourceClaim::FromJson(const nlohmann::json& j) {
  ResourceClaim claim;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &claim.metadata, [&](ObjectReader& r) {
    RETURN_IF_ERROR(r.Field("spec", &claim.spec, DecodeResourceClaimSpec));
    return r.Field("status", &claim.status, DecodeResourceClaimStatus);
  }));
  claim.raw = j;
  return claim;
}

nlohmann::json ResourceClaim::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  out["spec"] = EncodeResourceClaimSpec(spec);
  PutObject(out, "status", EncodeResourceClaimStatus(status));
  return out;
}

absl::StatusOr<ResourceClaimTemplate> ResourceClaimTemplate::FromJson(const nlohmann::json& j) {
  ResourceClaimTemplate tmpl;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &tmpl.metadata, [&](ObjectReader& r) {
    return r.Field("spec", &tmpl.spec, DecodeResourceClaimTemplateSpec);
  }));
  tmpl.raw = j;
  return tmpl;
}

nlohmann::json ResourceClaimTemplate::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json spec_json = StartObject(spec.unknown_fields);
  PutObject(spec_json, "metadata", spec.metadata.ToJson());
  spec_json["spec"] = EncodeResourceClaimSpec(spec.spec);
  out["spec"] = std::move(spec_json);
  return out;
}

}  // namespace dra::k8s
