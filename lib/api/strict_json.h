#pragma once

// Internal to lib/api: strict reading of JSON objects, in the manner of the Kubernetes strict
// decoder the Go driver uses (unknown fields and wrong JSON types are errors, field names are
// case-sensitive, null is the same as absent). Every error is a permanent config error
// (errors.h) whose message starts with the field path.
//
// Nothing here throws: values are read through lib/common/json_access.h.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/common/json_access.h"
#include "lib/k8s/quantity.h"
#include "nlohmann/json.hpp"

namespace dra::api::internal {

// Type names and field paths are those of the common JSON layer (lib/common/json_access.h), so
// that the webhook, the plugin and the API client word JSON errors alike.
using json_access::EntryPath;
using json_access::MemberPath;
inline absl::string_view JsonTypeName(const nlohmann::json& j) { return json_access::TypeName(j); }

// json_access::TypeError marked as a permanent config error:
// "<path>: expected <expected>, got <type of got>".
absl::Status TypeMismatch(absl::string_view path, absl::string_view expected,
                          const nlohmann::json& got);

// A JSON object whose members are checked against the fixed list of field names of one Go struct.
// Holds a pointer to the JSON, which must outlive it. Not thread-safe (a local of a decoder).
class StrictObject {
 public:
  // Fails unless `j` is an object, or when it has a member not in `fields`:
  //   "<path>.<member>: unknown field, allowed fields: a, b, c".
  static absl::StatusOr<StrictObject> Open(const nlohmann::json& j, std::string path,
                                           std::initializer_list<absl::string_view> fields);

  const std::string& Path() const { return path_; }
  std::string PathOf(absl::string_view key) const { return MemberPath(path_, key); }

  // The member, or nullptr when it is absent or null.
  const nlohmann::json* Get(absl::string_view key) const;

  // Typed reads. Absent or null members leave *out untouched and return OK.
  absl::Status GetString(absl::string_view key, std::optional<std::string>* out) const;
  // A JSON integer that fits int64 (Go's int). 50.0 or 5e1 are numbers, not integers.
  absl::Status GetInt(absl::string_view key, std::optional<int64_t>* out) const;
  absl::Status GetBool(absl::string_view key, std::optional<bool>* out) const;
  // A Kubernetes quantity: a string ("10Gi") or, as Go's decoder also allows, a bare number.
  absl::Status GetQuantity(absl::string_view key, std::optional<k8s::Quantity>* out) const;

 private:
  StrictObject(const nlohmann::json* object, std::string path)
      : object_(object), path_(std::move(path)) {}

  const nlohmann::json* object_;
  std::string path_;
};

// Decodes one quantity value at `path` (string or number; null is an error here).
absl::StatusOr<k8s::Quantity> DecodeQuantity(const nlohmann::json& j, absl::string_view path);

}  // namespace dra::api::internal
