#pragma once

// Shared helpers of the typed Kubernetes object codecs (object_meta.h, objects_*.h).
//
// Decoding contract (objects come from the API server, which may be newer than we are):
// - an absent or null field leaves the typed member at its default, as Go's encoding/json does;
// - a known field with the wrong JSON type is an InvalidArgument error that names the field path,
//   "spec.devices[3].attributes[\"index\"].int: expected integer, got string" (the paths and
//   wording of lib/common/json_access.h);
// - unknown fields are not errors. ObjectReader::UnknownFields() returns them, every struct keeps
//   them in its `unknown_fields` member and its encoder writes them back first, so fields we do
//   not model survive a decode -> modify -> encode -> PUT cycle.
//
// Encoding contract: Kubernetes `omitempty`. The Put* writers set a key, or erase it when the value
// is empty (so a stale value from `unknown_fields`/`raw` never survives a cleared typed field).
//
// Mapping rule used by all codecs: a Go pointer field (*string, *bool, *int64, *struct) is a
// std::optional; a Go value field is a plain member, omitted on output when zero unless the Go
// field has no omitempty (then it is always written).
//
// Nothing here throws: decoders only use checked nlohmann accessors.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/common/json_access.h"
#include "lib/common/status.h"
#include "lib/k8s/quantity.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// The element decoders of the common JSON layer (lib/common/json_access.h), named here so that
// codecs pass them to ObjectReader's templates unqualified. Their signature is the one every
// element decoder has: absl::Status(const nlohmann::json&, const std::string& path, T* out).
using json_access::DecodeBool;
using json_access::DecodeInt32;
using json_access::DecodeInt64;
using json_access::DecodeString;

// A Quantity is a JSON string ("80Gi"); a JSON number is accepted too, like Go's decoder does.
absl::Status DecodeQuantity(const nlohmann::json& j, const std::string& path, Quantity* out);
// Copies any JSON value (RawExtension, NodeSelector and other fields kept as raw JSON).
absl::Status DecodeRaw(const nlohmann::json& j, const std::string& path, nlohmann::json* out);

// Reads the members of one JSON object, building error paths and remembering which keys were
// asked for, so that the rest can be returned by UnknownFields().
//
// Every read takes the key and the destination; an absent or null member leaves the destination
// untouched and returns OK. The referenced JSON must outlive the reader. Not thread-safe.
class ObjectReader {
 public:
  // Fails unless `j` is an object or null (null reads as an empty object).
  static absl::StatusOr<ObjectReader> Create(const nlohmann::json& j, std::string path);

  // The path of this object in error messages, e.g. "spec.devices[3]".
  const std::string& Path() const { return path_; }

  absl::Status String(absl::string_view key, std::string* out);
  absl::Status Int64(absl::string_view key, int64_t* out);
  absl::Status Int32(absl::string_view key, int32_t* out);
  absl::Status Bool(absl::string_view key, bool* out);
  absl::Status Quantity(absl::string_view key, dra::k8s::Quantity* out);
  absl::Status OptionalString(absl::string_view key, std::optional<std::string>* out);
  absl::Status OptionalInt64(absl::string_view key, std::optional<int64_t>* out);
  absl::Status OptionalInt32(absl::string_view key, std::optional<int32_t>* out);
  absl::Status OptionalBool(absl::string_view key, std::optional<bool>* out);
  absl::Status StringList(absl::string_view key, std::vector<std::string>* out);
  absl::Status StringMap(absl::string_view key, std::map<std::string, std::string>* out);
  absl::Status QuantityMap(absl::string_view key, std::map<std::string, dra::k8s::Quantity>* out);
  // Any JSON value, copied.
  absl::Status Raw(absl::string_view key, nlohmann::json* out);

  // Decodes the member with `decode(value, path, out)`.
  template <typename T, typename Fn>
  absl::Status Field(absl::string_view key, T* out, Fn decode);

  // Like Field, but sets *out only when the member is present and not null.
  template <typename T, typename Fn>
  absl::Status Optional(absl::string_view key, std::optional<T>* out, Fn decode);

  // The member must be an array; each element is decoded with `decode(element, "key[i]", &t)`.
  template <typename T, typename Fn>
  absl::Status List(absl::string_view key, std::vector<T>* out, Fn decode);

  // The member must be an object; each value is decoded with `decode(value, "key[\"k\"]", &t)`.
  template <typename T, typename Fn>
  absl::Status Map(absl::string_view key, std::map<std::string, T>* out, Fn decode);

  // The members whose keys no read above named, as a JSON object (null when there are none).
  nlohmann::json UnknownFields() const;

 private:
  ObjectReader(const nlohmann::json* object, std::string path)
      : object_(object), path_(std::move(path)) {}

  // Records `key` as known; returns the member, or nullptr when it is absent or null.
  const nlohmann::json* Find(absl::string_view key);

  const nlohmann::json* object_;  // nullptr when the object itself was null
  std::string path_;
  std::vector<std::string> known_;
};

template <typename T, typename Fn>
absl::Status ObjectReader::Field(absl::string_view key, T* out, Fn decode) {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  return decode(*value, json_access::MemberPath(path_, key), out);
}

template <typename T, typename Fn>
absl::Status ObjectReader::Optional(absl::string_view key, std::optional<T>* out, Fn decode) {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  T decoded{};
  RETURN_IF_ERROR(decode(*value, json_access::MemberPath(path_, key), &decoded));
  *out = std::move(decoded);
  return absl::OkStatus();
}

template <typename T, typename Fn>
absl::Status ObjectReader::List(absl::string_view key, std::vector<T>* out, Fn decode) {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  std::string path = json_access::MemberPath(path_, key);
  if (!value->is_array()) return json_access::TypeError(path, "array", *value);
  std::vector<T> decoded;
  decoded.reserve(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    T element{};
    RETURN_IF_ERROR(decode((*value)[i], json_access::IndexPath(path, i), &element));
    decoded.push_back(std::move(element));
  }
  *out = std::move(decoded);
  return absl::OkStatus();
}

template <typename T, typename Fn>
absl::Status ObjectReader::Map(absl::string_view key, std::map<std::string, T>* out, Fn decode) {
  const nlohmann::json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  std::string path = json_access::MemberPath(path_, key);
  if (!value->is_object()) return json_access::TypeError(path, "object", *value);
  std::map<std::string, T> decoded;
  for (const auto& [k, v] : value->items()) {
    T element{};
    RETURN_IF_ERROR(decode(v, json_access::EntryPath(path, k), &element));
    decoded.emplace(k, std::move(element));
  }
  *out = std::move(decoded);
  return absl::OkStatus();
}

// ---- Encoding ----

// The start of a struct's JSON: a copy of its `unknown_fields` when that is an object, else {}.
nlohmann::json StartObject(const nlohmann::json& unknown_fields);

// omitempty writers: set obj[key] to the value, or erase the key when the value is empty
// ("" / 0 / false / nullopt / empty container / null). `obj` must be a JSON object.
void PutString(nlohmann::json& obj, absl::string_view key, const std::string& value);
void PutInt64(nlohmann::json& obj, absl::string_view key, int64_t value);
void PutBool(nlohmann::json& obj, absl::string_view key, bool value);
void PutOptionalString(nlohmann::json& obj, absl::string_view key,
                       const std::optional<std::string>& value);
void PutOptionalInt64(nlohmann::json& obj, absl::string_view key,
                      const std::optional<int64_t>& value);
void PutOptionalBool(nlohmann::json& obj, absl::string_view key, const std::optional<bool>& value);
void PutStringList(nlohmann::json& obj, absl::string_view key,
                   const std::vector<std::string>& value);
void PutStringMap(nlohmann::json& obj, absl::string_view key,
                  const std::map<std::string, std::string>& value);
void PutQuantityMap(nlohmann::json& obj, absl::string_view key,
                    const std::map<std::string, Quantity>& value);
// Raw JSON: erased when null.
void PutRaw(nlohmann::json& obj, absl::string_view key, const nlohmann::json& value);
// A nested struct's JSON: erased when null or an empty object.
void PutObject(nlohmann::json& obj, absl::string_view key, nlohmann::json value);

// Lists and maps of structs: each element encoded with `encode(element)`; erased when empty.
template <typename T, typename Fn>
void PutList(nlohmann::json& obj, absl::string_view key, const std::vector<T>& value, Fn encode) {
  if (value.empty()) {
    obj.erase(std::string(key));
    return;
  }
  nlohmann::json array = nlohmann::json::array();
  for (const T& element : value) array.push_back(encode(element));
  obj[std::string(key)] = std::move(array);
}

template <typename T, typename Fn>
void PutMap(nlohmann::json& obj, absl::string_view key, const std::map<std::string, T>& value,
            Fn encode) {
  if (value.empty()) {
    obj.erase(std::string(key));
    return;
  }
  nlohmann::json map = nlohmann::json::object();
  for (const auto& [k, v] : value) map[k] = encode(v);
  obj[std::string(key)] = std::move(map);
}

}  // namespace dra::k8s
