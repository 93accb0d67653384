#include "lib/api/strict_json.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/errors.h"
#include "lib/common/status.h"

namespace dra::api::internal {
namespace {

bool IsPlainKey(absl::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

}  // namespace

absl::string_view JsonTypeName(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    default:
      return "binary";
  }
}

absl::Status TypeMismatch(absl::string_view path, absl::string_view expected,
                          const nlohmann::json& got) {
  return ConfigError(path, absl::StrCat("expected ", expected, ", got ", JsonTypeName(got)));
}

std::string MemberPath(absl::string_view parent, absl::string_view key) {
  if (!IsPlainKey(key)) return EntryPath(parent, key);
  if (parent.empty()) return std::string(key);
  return absl::StrCat(parent, ".", key);
}

std::string EntryPath(absl::string_view parent, absl::string_view key) {
  return absl::StrCat(parent, "[\"", absl::CHexEscape(key), "\"]");
}

absl::StatusOr<StrictObject> StrictObject::Open(const nlohmann::json& j, std::string path,
                                                std::initializer_list<absl::string_view> fields) {
  if (!j.is_object()) {
    if (path.empty()) {
      return ConfigError("", absl::StrCat("expected a JSON object, got ", JsonTypeName(j)));
    }
    return TypeMismatch(path, "object", j);
  }
  // nlohmann keeps object members sorted by key, so the first unknown one reported is stable.
  for (const auto& [key, value] : j.items()) {
    if (std::find(fields.begin(), fields.end(), absl::string_view(key)) == fields.end()) {
      return ConfigError(MemberPath(path, key), absl::StrCat("unknown field, allowed fields: ",
                                                             absl::StrJoin(fields, ", ")));
    }
  }
  return StrictObject(&j, std::move(path));
}

const nlohmann::json* StrictObject::Get(absl::string_view key) const {
  auto it = object_->find(std::string(key));
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status StrictObject::GetString(absl::string_view key, std::optional<std::string>* out) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_string()) return TypeMismatch(PathOf(key), "string", *v);
  *out = v->get_ref<const std::string&>();
  return absl::OkStatus();
}

absl::Status StrictObject::GetInt(absl::string_view key, std::optional<int64_t>* out) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return ConfigError(PathOf(key), "integer out of range");
    }
    *out = static_cast<int64_t>(u);
    return absl::OkStatus();
  }
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return absl::OkStatus();
  }
  return TypeMismatch(PathOf(key), "integer", *v);
}

absl::Status StrictObject::GetBool(absl::string_view key, std::optional<bool>* out) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_boolean()) return TypeMismatch(PathOf(key), "boolean", *v);
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status StrictObject::GetQuantity(absl::string_view key,
                                       std::optional<k8s::Quantity>* out) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(*out, DecodeQuantity(*v, PathOf(key)));
  return absl::OkStatus();
}

absl::StatusOr<k8s::Quantity> DecodeQuantity(const nlohmann::json& j, absl::string_view path) {
  absl::StatusOr<k8s::Quantity> parsed;
  if (j.is_string()) {
    parsed = k8s::Quantity::Parse(j.get_ref<const std::string&>());
  } else if (j.is_number()) {
    // Go's Quantity.UnmarshalJSON parses an unquoted number's text as a quantity.
    parsed = k8s::Quantity::Parse(j.dump());
  } else {
    return TypeMismatch(path, "quantity string (e.g. \"10Gi\")", j);
  }
  if (!parsed.ok()) return ConfigError(path, parsed.status().message());
  return parsed;
}

}  // namespace dra::api::internal
