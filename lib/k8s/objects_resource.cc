// ResourceSlice, DeviceClass and the element codecs they share with ResourceClaim
// (objects_resource_claim.cc).

#include "lib/k8s/objects_resource.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"

namespace dra::k8s {

absl::Status DecodeDeviceSelector(const nlohmann::json& j, const std::string& path,
                                  DeviceSelector* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Optional(
      "cel", &out->cel,
      [](const nlohmann::json& cel_json, const std::string& cel_path, CelDeviceSelector* cel) {
        ASSIGN_OR_RETURN(ObjectReader c, ObjectReader::Create(cel_json, cel_path));
        RETURN_IF_ERROR(c.String("expression", &cel->expression));
        cel->unknown_fields = c.UnknownFields();
        return absl::OkStatus();
      }));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceSelector(const DeviceSelector& selector) {
  nlohmann::json out = StartObject(selector.unknown_fields);
  if (selector.cel.has_value()) {
    nlohmann::json cel = StartObject(selector.cel->unknown_fields);
    cel["expression"] = selector.cel->expression;
    out["cel"] = std::move(cel);
  } else {
    out.erase("cel");
  }
  return out;
}

absl::Status DecodeOpaqueDeviceConfiguration(const nlohmann::json& j, const std::string& path,
                                             OpaqueDeviceConfiguration* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("driver", &out->driver));
  RETURN_IF_ERROR(r.Raw("parameters", &out->parameters));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeOpaqueDeviceConfiguration(const OpaqueDeviceConfiguration& opaque) {
  nlohmann::json out = StartObject(opaque.unknown_fields);
  out["driver"] = opaque.driver;
  // Required in Go (no omitempty); the server rejects a missing one.
  out["parameters"] = opaque.parameters.is_null() ? nlohmann::json::object() : opaque.parameters;
  return out;
}

// ---- DeviceAttribute ----

DeviceAttribute DeviceAttribute::Int(int64_t value) {
  DeviceAttribute a;
  a.int_value = value;
  return a;
}
DeviceAttribute DeviceAttribute::Bool(bool value) {
  DeviceAttribute a;
  a.bool_value = value;
  return a;
}
DeviceAttribute DeviceAttribute::String(std::string value) {
  DeviceAttribute a;
  a.string_value = std::move(value);
  return a;
}
DeviceAttribute DeviceAttribute::Version(std::string value) {
  DeviceAttribute a;
  a.version_value = std::move(value);
  return a;
}

int DeviceAttribute::ValueCount() const {
  return int_value.has_value() + bool_value.has_value() + string_value.has_value() +
         version_value.has_value() + !int_values.empty() + !bool_values.empty() +
         !string_values.empty() + !version_values.empty();
}

namespace {

absl::Status DecodeDeviceAttribute(const nlohmann::json& j, const std::string& path,
                                   DeviceAttribute* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.OptionalInt64("int", &out->int_value));
  RETURN_IF_ERROR(r.OptionalBool("bool", &out->bool_value));
  RETURN_IF_ERROR(r.OptionalString("string", &out->string_value));
  RETURN_IF_ERROR(r.OptionalString("version", &out->version_value));
  RETURN_IF_ERROR(r.List("ints", &out->int_values, DecodeInt64));
  RETURN_IF_ERROR(r.List("bools", &out->bool_values, DecodeBool));
  RETURN_IF_ERROR(r.StringList("strings", &out->string_values));
  RETURN_IF_ERROR(r.StringList("versions", &out->version_values));
  out->unknown_fields = r.UnknownFields();
  if (int count = out->ValueCount(); count != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": must have exactly one of int, bool, string, version, ints, bools, strings, "
                     "versions; has ",
                     count));
  }
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceAttribute(const DeviceAttribute& a) {
  nlohmann::json out = StartObject(a.unknown_fields);
  PutOptionalInt64(out, "int", a.int_value);
  PutOptionalBool(out, "bool", a.bool_value);
  PutOptionalString(out, "string", a.string_value);
  PutOptionalString(out, "version", a.version_value);
  if (a.int_values.empty()) {
    out.erase("ints");
  } else {
    out["ints"] = a.int_values;
  }
  if (a.bool_values.empty()) {
    out.erase("bools");
  } else {
    out["bools"] = a.bool_values;
  }
  PutStringList(out, "strings", a.string_values);
  PutStringList(out, "versions", a.version_values);
  return out;
}

absl::Status DecodeDeviceCapacity(const nlohmann::json& j, const std::string& path,
                                  DeviceCapacity* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Quantity("value", &out->value));
  RETURN_IF_ERROR(r.Raw("requestPolicy", &out->request_policy));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceCapacity(const DeviceCapacity& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["value"] = c.value.ToString();
  PutRaw(out, "requestPolicy", c.request_policy);
  return out;
}

absl::Status DecodeCounter(const nlohmann::json& j, const std::string& path, Counter* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Quantity("value", &out->value));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeCounter(const Counter& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["value"] = c.value.ToString();
  return out;
}

absl::Status DecodeCounterSet(const nlohmann::json& j, const std::string& path, CounterSet* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.Map("counters", &out->counters, DecodeCounter));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeCounterSet(const CounterSet& s) {
  nlohmann::json out = StartObject(s.unknown_fields);
  out["name"] = s.name;
  PutMap(out, "counters", s.counters, EncodeCounter);
  return out;
}

absl::Status DecodeDeviceCounterConsumption(const nlohmann::json& j, const std::string& path,
                                            DeviceCounterConsumption* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("counterSet", &out->counter_set));
  RETURN_IF_ERROR(r.Map("counters", &out->counters, DecodeCounter));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceCounterConsumption(const DeviceCounterConsumption& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  out["counterSet"] = c.counter_set;
  PutMap(out, "counters", c.counters, EncodeCounter);
  return out;
}

absl::Status DecodeDeviceTaint(const nlohmann::json& j, const std::string& path, DeviceTaint* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("key", &out->key));
  RETURN_IF_ERROR(r.String("value", &out->value));
  RETURN_IF_ERROR(r.String("effect", &out->effect));
  RETURN_IF_ERROR(r.OptionalString("timeAdded", &out->time_added));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceTaint(const DeviceTaint& t) {
  nlohmann::json out = StartObject(t.unknown_fields);
  out["key"] = t.key;
  PutString(out, "value", t.value);
  out["effect"] = t.effect;
  PutOptionalString(out, "timeAdded", t.time_added);
  return out;
}

absl::Status DecodeDevice(const nlohmann::json& j, const std::string& path, Device* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.Map("attributes", &out->attributes, DecodeDeviceAttribute));
  RETURN_IF_ERROR(r.Map("capacity", &out->capacity, DecodeDeviceCapacity));
  RETURN_IF_ERROR(
      r.List("consumesCounters", &out->consumes_counters, DecodeDeviceCounterConsumption));
  RETURN_IF_ERROR(r.OptionalString("nodeName", &out->node_name));
  RETURN_IF_ERROR(r.Raw("nodeSelector", &out->node_selector));
  RETURN_IF_ERROR(r.OptionalBool("allNodes", &out->all_nodes));
  RETURN_IF_ERROR(r.List("taints", &out->taints, DecodeDeviceTaint));
  RETURN_IF_ERROR(r.OptionalBool("bindsToNode", &out->binds_to_node));
  RETURN_IF_ERROR(r.StringList("bindingConditions", &out->binding_conditions));
  RETURN_IF_ERROR(r.StringList("bindingFailureConditions", &out->binding_failure_conditions));
  RETURN_IF_ERROR(r.OptionalBool("allowMultipleAllocations", &out->allow_multiple_allocations));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDevice(const Device& d) {
  nlohmann::json out = StartObject(d.unknown_fields);
  out["name"] = d.name;
  PutMap(out, "attributes", d.attributes, EncodeDeviceAttribute);
  PutMap(out, "capacity", d.capacity, EncodeDeviceCapacity);
  PutList(out, "consumesCounters", d.consumes_counters, EncodeDeviceCounterConsumption);
  PutOptionalString(out, "nodeName", d.node_name);
  PutRaw(out, "nodeSelector", d.node_selector);
  PutOptionalBool(out, "allNodes", d.all_nodes);
  PutList(out, "taints", d.taints, EncodeDeviceTaint);
  PutOptionalBool(out, "bindsToNode", d.binds_to_node);
  PutStringList(out, "bindingConditions", d.binding_conditions);
  PutStringList(out, "bindingFailureConditions", d.binding_failure_conditions);
  PutOptionalBool(out, "allowMultipleAllocations", d.allow_multiple_allocations);
  return out;
}

absl::Status DecodeResourcePool(const nlohmann::json& j, const std::string& path,
                                ResourcePool* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.Int64("generation", &out->generation));
  RETURN_IF_ERROR(r.Int64("resourceSliceCount", &out->resource_slice_count));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeResourceSliceSpec(const nlohmann::json& j, const std::string& path,
                                     ResourceSliceSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("driver", &out->driver));
  RETURN_IF_ERROR(r.Field("pool", &out->pool, DecodeResourcePool));
  RETURN_IF_ERROR(r.OptionalString("nodeName", &out->node_name));
  RETURN_IF_ERROR(r.Raw("nodeSelector", &out->node_selector));
  RETURN_IF_ERROR(r.OptionalBool("allNodes", &out->all_nodes));
  RETURN_IF_ERROR(r.OptionalBool("perDeviceNodeSelection", &out->per_device_node_selection));
  RETURN_IF_ERROR(r.List("devices", &out->devices, DecodeDevice));
  RETURN_IF_ERROR(r.List("sharedCounters", &out->shared_counters, DecodeCounterSet));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeResourceSliceSpec(const ResourceSliceSpec& spec) {
  nlohmann::json out = StartObject(spec.unknown_fields);
  out["driver"] = spec.driver;
  nlohmann::json pool = StartObject(spec.pool.unknown_fields);
  pool["name"] = spec.pool.name;
  pool["generation"] = spec.pool.generation;
  pool["resourceSliceCount"] = spec.pool.resource_slice_count;
  out["pool"] = std::move(pool);
  PutOptionalString(out, "nodeName", spec.node_name);
  PutRaw(out, "nodeSelector", spec.node_selector);
  PutOptionalBool(out, "allNodes", spec.all_nodes);
  PutOptionalBool(out, "perDeviceNodeSelection", spec.per_device_node_selection);
  PutList(out, "devices", spec.devices, EncodeDevice);
  PutList(out, "sharedCounters", spec.shared_counters, EncodeCounterSet);
  return out;
}

absl::Status DecodeDeviceClassConfiguration(const nlohmann::json& j, const std::string& path,
                                            DeviceClassConfiguration* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Optional("opaque", &out->opaque, DecodeOpaqueDeviceConfiguration));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeDeviceClassConfiguration(const DeviceClassConfiguration& c) {
  nlohmann::json out = StartObject(c.unknown_fields);
  if (c.opaque.has_value()) {
    out["opaque"] = EncodeOpaqueDeviceConfiguration(*c.opaque);
  } else {
    out.erase("opaque");
  }
  return out;
}

absl::Status DecodeDeviceClassSpec(const nlohmann::json& j, const std::string& path,
                                   DeviceClassSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.List("selectors", &out->selectors, DecodeDeviceSelector));
  RETURN_IF_ERROR(r.List("config", &out->config, DecodeDeviceClassConfiguration));
  RETURN_IF_ERROR(r.OptionalString("extendedResourceName", &out->extended_resource_name));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResourceSlice> ResourceSlice::FromJson(const nlohmann::json& j) {
  ResourceSlice slice;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &slice.metadata, [&](ObjectReader& r) {
    return r.Field("spec", &slice.spec, DecodeResourceSliceSpec);
  }));
  slice.raw = j;
  return slice;
}

nlohmann::json ResourceSlice::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  out["spec"] = EncodeResourceSliceSpec(spec);
  return out;
}

absl::StatusOr<DeviceClass> DeviceClass::FromJson(const nlohmann::json& j) {
  DeviceClass device_class;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &device_class.metadata, [&](ObjectReader& r) {
    return r.Field("spec", &device_class.spec, DecodeDeviceClassSpec);
  }));
  device_class.raw = j;
  return device_class;
}

nlohmann::json DeviceClass::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json spec_json = StartObject(spec.unknown_fields);
  PutList(spec_json, "selectors", spec.selectors, EncodeDeviceSelector);
  PutList(spec_json, "config", spec.config, EncodeDeviceClassConfiguration);
  PutOptionalString(spec_json, "extendedResourceName", spec.extended_resource_name);
  out["spec"] = std::move(spec_json);
  return out;
}

}  // namespace dra::k8s
