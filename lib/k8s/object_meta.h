#pragma once

// metav1.ObjectMeta, OwnerReference and ListMeta, plus the skeleton shared by every typed kind's
// FromJson/ToJson (see json_decode.h for the decoding and omitempty contract).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/k8s/json_decode.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

struct OwnerReference {
  std::string api_version;  // JSON apiVersion; these four are always written
  std::string kind;
  std::string name;
  std::string uid;
  std::optional<bool> controller;
  std::optional<bool> block_owner_deletion;
  nlohmann::json unknown_fields;  // members we do not model, written back by the encoder
};

struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_name;  // JSON "namespace"
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;                 // RFC 3339, set by the server
  std::optional<std::string> deletion_timestamp;  // set while the object is being deleted
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;
  nlohmann::json unknown_fields;  // managedFields, deletionGracePeriodSeconds, ...

  static absl::StatusOr<ObjectMeta> FromJson(const nlohmann::json& j);
  // Empty fields are omitted (a create request sends no "uid": "").
  nlohmann::json ToJson() const;
};

// Metadata of a list response.
struct ListMeta {
  std::string resource_version;
  std::string continue_token;  // JSON "continue"
  std::optional<int64_t> remaining_item_count;

  static absl::StatusOr<ListMeta> FromJson(const nlohmann::json& j);
};

// Element decoders/encoders for nesting (ResourceClaimTemplate's spec.metadata, ...).
absl::Status DecodeObjectMeta(const nlohmann::json& j, const std::string& path, ObjectMeta* out);
absl::Status DecodeOwnerReference(const nlohmann::json& j, const std::string& path,
                                  OwnerReference* out);
nlohmann::json EncodeOwnerReference(const OwnerReference& ref);

// "v1" for the core group, "<group>/<version>" otherwise.
std::string ApiVersion(const ResourceInfo& info);

// The skeleton of every T::FromJson: `j` must be an object; apiVersion and kind, when present,
// must match `info`; metadata is decoded into `*meta`, then `decode_rest` reads the kind's other
// fields. Errors are prefixed with the kind and object, e.g.
// `ResourceSlice "node1-gpu": spec.devices[3].attributes["index"].int: expected int, got string`
// (`Pod "ns/name": ...` for namespaced kinds).
absl::Status DecodeTopLevel(const nlohmann::json& j, const ResourceInfo& info, ObjectMeta* meta,
                            absl::FunctionRef<absl::Status(ObjectReader&)> decode_rest);

// The skeleton of every T::ToJson: a copy of `raw` (when it is an object, so unknown top-level
// fields round-trip), apiVersion and kind from `info`, and metadata.
nlohmann::json EncodeTopLevel(const nlohmann::json& raw, const ResourceInfo& info,
                              const ObjectMeta& meta);

}  // namespace dra::k8s
