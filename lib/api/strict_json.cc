#include "lib/api/strict_json.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/errors.h"
#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"

namespace dra::api::internal {

absl::Status TypeMismatch(absl::string_view path, absl::string_view expected,
                          const nlohmann::json& got) {
  return MarkPermanentConfigError(json_access::TypeError(path, expected, got));
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
  std::string value;
  RETURN_IF_ERROR(MarkPermanentConfigError(json_access::DecodeString(*v, PathOf(key), &value)));
  *out = std::move(value);
  return absl::OkStatus();
}

absl::Status StrictObject::GetInt(absl::string_view key, std::optional<int64_t>* out) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  int64_t value = 0;
  RETURN_IF_ERROR(MarkPermanentConfigError(json_access::DecodeInt64(*v, PathOf(key), &value)));
  *out = value;
  return absl::OkStatus();
}

absl::Status StrictObject::GetBool(absl::string_view key, std::optional<bool>* out) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  bool value = false;
  RETURN_IF_ERROR(MarkPermanentConfigError(json_access::DecodeBool(*v, PathOf(key), &value)));
  *out = value;
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
  k8s::Quantity q;
  RETURN_IF_ERROR(MarkPermanentConfigError(k8s::DecodeQuantity(j, std::string(path), &q)));
  return q;
}

}  // namespace dra::api::internal
