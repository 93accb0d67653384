#include "lib/k8s/objects_core.h"

#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"

namespace dra::k8s {
namespace {

// ---- Node ----

absl::Status DecodeNodeCondition(const nlohmann::json& j, const std::string& path,
                                 NodeCondition* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("type", &out->type));
  RETURN_IF_ERROR(r.String("status", &out->status));
  RETURN_IF_ERROR(r.String("reason", &out->reason));
  RETURN_IF_ERROR(r.String("message", &out->message));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeNodeCondition(const NodeCondition& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["type"] = c.type;
  out["status"] = c.status;
  PutString(out, "reason", c.reason);
  PutString(out, "message", c.message);
  return out;
}

absl::Status DecodeNodeSpec(const nlohmann::json& j, const std::string& path, NodeSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Bool("unschedulable", &out->unschedulable));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeNodeSystemInfo(const nlohmann::json& j, const std::string& path,
                                  NodeSystemInfo* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("bootID", &out->boot_id));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeNodeStatus(const nlohmann::json& j, const std::string& path, NodeStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.List("conditions", &out->conditions, DecodeNodeCondition));
  RETURN_IF_ERROR(r.Field("nodeInfo", &out->node_info, DecodeNodeSystemInfo));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

// ---- Pod ----

absl::Status DecodePodResourceClaim(const nlohmann::json& j, const std::string& path,
                                    PodResourceClaim* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.OptionalString("resourceClaimName", &out->resource_claim_name));
  RETURN_IF_ERROR(
      r.OptionalString("resourceClaimTemplateName", &out->resource_claim_template_name));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodePodResourceClaim(const PodResourceClaim& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["name"] = c.name;
  PutOptionalString(out, "resourceClaimName", c.resource_claim_name);
  PutOptionalString(out, "resourceClaimTemplateName", c.resource_claim_template_name);
  return out;
}

absl::Status DecodeContainerResourceClaim(const nlohmann::json& j, const std::string& path,
                                          ContainerResourceClaim* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("request", &out->request));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeContainerResourceClaim(const ContainerResourceClaim& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["name"] = c.name;
  PutString(out, "request", c.request);
  return out;
}

absl::Status DecodeContainerResources(const nlohmann::json& j, const std::string& path,
                                      ContainerResources* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.List("claims", &out->claims, DecodeContainerResourceClaim));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeContainer(const nlohmann::json& j, const std::string& path, Container* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("image", &out->image));
  RETURN_IF_ERROR(r.Field("resources", &out->resources, DecodeContainerResources));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeContainer(const Container& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["name"] = c.name;
  PutString(out, "image", c.image);
  nlohmann::json resources = StartObject(c.resources.unknown_fields);
  PutList(resources, "claims", c.resources.claims, EncodeContainerResourceClaim);
  PutObject(out, "resources", std::move(resources));
  return out;
}

absl::Status DecodePodSpec(const nlohmann::json& j, const std::string& path, PodSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("nodeName", &out->node_name));
  RETURN_IF_ERROR(r.List("resourceClaims", &out->resource_claims, DecodePodResourceClaim));
  RETURN_IF_ERROR(r.List("initContainers", &out->init_containers, DecodeContainer));
  RETURN_IF_ERROR(r.List("containers", &out->containers, DecodeContainer));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodePodResourceClaimStatus(const nlohmann::json& j, const std::string& path,
                                          PodResourceClaimStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.OptionalString("resourceClaimName", &out->resource_claim_name));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodePodResourceClaimStatus(const PodResourceClaimStatus& s) {
  nlohmann::json out = StartObject(s.unknown_fields);
  out["name"] = s.name;
  PutOptionalString(out, "resourceClaimName", s.resource_claim_name);
  return out;
}

absl::Status DecodePodStatus(const nlohmann::json& j, const std::string& path, PodStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("phase", &out->phase));
  RETURN_IF_ERROR(
      r.List("resourceClaimStatuses", &out->resource_claim_statuses, DecodePodResourceClaimStatus));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

// ---- Event ----

absl::Status DecodeObjectReference(const nlohmann::json& j, const std::string& path,
                                   ObjectReference* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("apiVersion", &out->api_version));
  RETURN_IF_ERROR(r.String("kind", &out->kind));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("namespace", &out->namespace_name));
  RETURN_IF_ERROR(r.String("uid", &out->uid));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeEventSource(const nlohmann::json& j, const std::string& path, EventSource* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("component", &out->component));
  RETURN_IF_ERROR(r.String("host", &out->host));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Node> Node::FromJson(const nlohmann::json& j) {
  Node node;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &node.metadata, [&](ObjectReader& r) {
    RETURN_IF_ERROR(r.Field("spec", &node.spec, DecodeNodeSpec));
    return r.Field("status", &node.status, DecodeNodeStatus);
  }));
  node.raw = j;
  return node;
}

nlohmann::json Node::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json spec_json = StartObject(spec.unknown_fields);
  PutBool(spec_json, "unschedulable", spec.unschedulable);
  out["spec"] = std::move(spec_json);

  nlohmann::json status_json = StartObject(status.unknown_fields);
  PutList(status_json, "conditions", status.conditions, EncodeNodeCondition);
  nlohmann::json node_info = StartObject(status.node_info.unknown_fields);
  PutString(node_info, "bootID", status.node_info.boot_id);
  PutObject(status_json, "nodeInfo", std::move(node_info));
  PutObject(out, "status", std::move(status_json));
  return out;
}

absl::StatusOr<Pod> Pod::FromJson(const nlohmann::json& j) {
  Pod pod;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &pod.metadata, [&](ObjectReader& r) {
    RETURN_IF_ERROR(r.Field("spec", &pod.spec, DecodePodSpec));
    return r.Field("status", &pod.status, DecodePodStatus);
  }));
  pod.raw = j;
  return pod;
}

nlohmann::json Pod::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json spec_json = StartObject(spec.unknown_fields);
  PutString(spec_json, "nodeName", spec.node_name);
  PutList(spec_json, "resourceClaims", spec.resource_claims, EncodePodResourceClaim);
  PutList(spec_json, "initContainers", spec.init_containers, EncodeContainer);
  // Go's PodSpec.Containers has no omitempty.
  spec_json["containers"] = nlohmann::json::array();
  for (const Container& c : spec.containers) spec_json["containers"].push_back(EncodeContainer(c));
  out["spec"] = std::move(spec_json);

  nlohmann::json status_json = StartObject(status.unknown_fields);
  PutString(status_json, "phase", status.phase);
  PutList(status_json, "resourceClaimStatuses", status.resource_claim_statuses,
          EncodePodResourceClaimStatus);
  PutObject(out, "status", std::move(status_json));
  return out;
}

absl::StatusOr<Event> Event::FromJson(const nlohmann::json& j) {
  Event event;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &event.metadata, [&](ObjectReader& r) {
    RETURN_IF_ERROR(r.Field("involvedObject", &event.involved_object, DecodeObjectReference));
    RETURN_IF_ERROR(r.String("reason", &event.reason));
    RETURN_IF_ERROR(r.String("message", &event.message));
    RETURN_IF_ERROR(r.String("type", &event.type));
    RETURN_IF_ERROR(r.Field("source", &event.source, DecodeEventSource));
    RETURN_IF_ERROR(r.String("reportingComponent", &event.reporting_component));
    RETURN_IF_ERROR(r.String("reportingInstance", &event.reporting_instance));
    RETURN_IF_ERROR(r.String("firstTimestamp", &event.first_timestamp));
    RETURN_IF_ERROR(r.String("lastTimestamp", &event.last_timestamp));
    return r.Int32("count", &event.count);
  }));
  event.raw = j;
  return event;
}

nlohmann::json Event::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json involved = StartObject(involved_object.unknown_fields);
  PutString(involved, "apiVersion", involved_object.api_version);
  PutString(involved, "kind", involved_object.kind);
  PutString(involved, "name", involved_object.name);
  PutString(involved, "namespace", involved_object.namespace_name);
  PutString(involved, "uid", involved_object.uid);
  out["involvedObject"] = std::move(involved);  // required, no omitempty in Go
  PutString(out, "reason", reason);
  PutString(out, "message", message);
  PutString(out, "type", type);
  nlohmann::json source_json = StartObject(source.unknown_fields);
  PutString(source_json, "component", source.component);
  PutString(source_json, "host", source.host);
  PutObject(out, "source", std::move(source_json));
  PutString(out, "reportingComponent", reporting_component);
  PutString(out, "reportingInstance", reporting_instance);
  PutString(out, "firstTimestamp", first_timestamp);
  PutString(out, "lastTimestamp", last_timestamp);
  PutInt64(out, "count", count);
  return out;
}

}  // namespace dra::k8s
