#include "lib/k8s/object_meta.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::k8s {

absl::Status DecodeOwnerReference(const nlohmann::json& j, const std::string& path,
                                  OwnerReference* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("apiVersion", &out->api_version));
  RETURN_IF_ERROR(r.String("kind", &out->kind));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("uid", &out->uid));
  RETURN_IF_ERROR(r.OptionalBool("controller", &out->controller));
  RETURN_IF_ERROR(r.OptionalBool("blockOwnerDeletion", &out->block_owner_deletion));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

nlohmann::json EncodeOwnerReference(const OwnerReference& ref) {
  nlohmann::json out = StartObject(ref.unknown_fields);
  out["apiVersion"] = ref.api_version;
  out["kind"] = ref.kind;
  out["name"] = ref.name;
  out["uid"] = ref.uid;
  PutOptionalBool(out, "controller", ref.controller);
  PutOptionalBool(out, "blockOwnerDeletion", ref.block_owner_deletion);
  return out;
}

absl::Status DecodeObjectMeta(const nlohmann::json& j, const std::string& path, ObjectMeta* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("generateName", &out->generate_name));
  RETURN_IF_ERROR(r.String("namespace", &out->namespace_name));
  RETURN_IF_ERROR(r.String("uid", &out->uid));
  RETURN_IF_ERROR(r.String("resourceVersion", &out->resource_version));
  RETURN_IF_ERROR(r.Int64("generation", &out->generation));
  RETURN_IF_ERROR(r.String("creationTimestamp", &out->creation_timestamp));
  RETURN_IF_ERROR(r.OptionalString("deletionTimestamp", &out->deletion_timestamp));
  RETURN_IF_ERROR(r.StringMap("labels", &out->labels));
  RETURN_IF_ERROR(r.StringMap("annotations", &out->annotations));
  RETURN_IF_ERROR(r.List("ownerReferences", &out->owner_references, DecodeOwnerReference));
  RETURN_IF_ERROR(r.StringList("finalizers", &out->finalizers));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::StatusOr<ObjectMeta> ObjectMeta::FromJson(const nlohmann::json& j) {
  ObjectMeta meta;
  RETURN_IF_ERROR(DecodeObjectMeta(j, "metadata", &meta));
  return meta;
}

nlohmann::json ObjectMeta::ToJson() const {
  nlohmann::json out = StartObject(unknown_fields);
  PutString(out, "name", name);
  PutString(out, "generateName", generate_name);
  PutString(out, "namespace", namespace_name);
  PutString(out, "uid", uid);
  PutString(out, "resourceVersion", resource_version);
  PutInt64(out, "generation", generation);
  PutString(out, "creationTimestamp", creation_timestamp);
  PutOptionalString(out, "deletionTimestamp", deletion_timestamp);
  PutStringMap(out, "labels", labels);
  PutStringMap(out, "annotations", annotations);
  PutList(out, "ownerReferences", owner_references, EncodeOwnerReference);
  PutStringList(out, "finalizers", finalizers);
  return out;
}

absl::StatusOr<ListMeta> ListMeta::FromJson(const nlohmann::json& j) {
  ListMeta meta;
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, "metadata"));
  RETURN_IF_ERROR(r.String("resourceVersion", &meta.resource_version));
  RETURN_IF_ERROR(r.String("continue", &meta.continue_token));
  RETURN_IF_ERROR(r.OptionalInt64("remainingItemCount", &meta.remaining_item_count));
  return meta;
}

std::string ApiVersion(const ResourceInfo& info) {
  if (info.group.empty()) return std::string(info.version);
  return absl::StrCat(info.group, "/", info.version);
}

namespace {

// `Kind "ns/name"`, `Kind "name"` or `Kind`, from the undecoded JSON so that it works even when
// the metadata itself is malformed.
std::string ObjectLabel(const nlohmann::json& j, const ResourceInfo& info) {
  std::string name;
  std::string ns;
  if (j.is_object()) {
    auto meta = j.find("metadata");
    if (meta != j.end() && meta->is_object()) {
      auto it = meta->find("name");
      if (it != meta->end() && it->is_string()) name = it->get<std::string>();
      it = meta->find("namespace");
      if (it != meta->end() && it->is_string()) ns = it->get<std::string>();
    }
  }
  if (name.empty()) return std::string(info.kind);
  if (ns.empty()) return absl::StrCat(info.kind, " \"", name, "\"");
  return absl::StrCat(info.kind, " \"", ns, "/", name, "\"");
}

absl::Status DecodeTopLevelFields(const nlohmann::json& j, const ResourceInfo& info,
                                  ObjectMeta* meta,
                                  absl::FunctionRef<absl::Status(ObjectReader&)> decode_rest) {
  RETURN_IF_ERROR(json_access::ExpectObject(j, ""));
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, ""));
  std::string api_version;
  std::string kind;
  RETURN_IF_ERROR(r.String("apiVersion", &api_version));
  RETURN_IF_ERROR(r.String("kind", &kind));
  if (!api_version.empty() && api_version != ApiVersion(info)) {
    return absl::InvalidArgumentError(
        absl::StrCat("apiVersion: expected ", ApiVersion(info), ", got ", api_version));
  }
  if (!kind.empty() && kind != info.kind) {
    return absl::InvalidArgumentError(absl::StrCat("kind: expected ", info.kind, ", got ", kind));
  }
  RETURN_IF_ERROR(r.Field("metadata", meta, DecodeObjectMeta));
  return decode_rest(r);
}

}  // namespace

absl::Status DecodeTopLevel(const nlohmann::json& j, const ResourceInfo& info, ObjectMeta* meta,
                            absl::FunctionRef<absl::Status(ObjectReader&)> decode_rest) {
  absl::Status status;
  try {
    status = DecodeTopLevelFields(j, info, meta, decode_rest);
  } catch (const nlohmann::json::exception& e) {
    // Decoders use checked accessors only; this is a safety net so no exception escapes.
    status = absl::InternalError(absl::StrCat("unexpected JSON error: ", e.what()));
  }
  return Annotate(status, ObjectLabel(j, info));
}

nlohmann::json EncodeTopLevel(const nlohmann::json& raw, const ResourceInfo& info,
                              const ObjectMeta& meta) {
  nlohmann::json out = StartObject(raw);
  out["apiVersion"] = ApiVersion(info);
  out["kind"] = std::string(info.kind);
  out["metadata"] = meta.ToJson();
  return out;
}

}  // namespace dra::k8s
