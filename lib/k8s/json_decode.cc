#include "lib/k8s/json_decode.h"

#include <algorithm>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dra::k8s {

absl::Status DecodeQuantity(const nlohmann::json& j, const std::string& path, Quantity* out) {
  absl::StatusOr<Quantity> parsed;
  if (j.is_string()) {
    parsed = Quantity::Parse(j.get_ref<const std::string&>());
  } else if (j.is_number()) {
    parsed = Quantity::Parse(j.dump());
  } else {
    return json_access::TypeError(path, "quantity string (e.g. \"10Gi\")", j);
  }
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  *out = *parsed;
  return absl::OkStatus();
}

absl::Status DecodeRaw(const nlohmann::json& j, const std::string& path, nlohmann::json* out) {
  *out = j;
  return absl::OkStatus();
}

absl::StatusOr<ObjectReader> ObjectReader::Create(const nlohmann::json& j, std::string path) {
  if (j.is_null()) return ObjectReader(nullptr, std::move(path));
  if (!j.is_object()) return json_access::TypeError(path, "object", j);
  return ObjectReader(&j, std::move(path));
}

const nlohmann::json* ObjectReader::Find(absl::string_view key) {
  known_.emplace_back(key);
  if (object_ == nullptr) return nullptr;
  auto it = object_->find(std::string_view(key.data(), key.size()));
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status ObjectReader::String(absl::string_view key, std::string* out) {
  return Field(key, out, DecodeString);
}
absl::Status ObjectReader::Int64(absl::string_view key, int64_t* out) {
  return Field(key, out, DecodeInt64);
}
absl::Status ObjectReader::Int32(absl::string_view key, int32_t* out) {
  return Field(key, out, DecodeInt32);
}
absl::Status ObjectReader::Bool(absl::string_view key, bool* out) {
  return Field(key, out, DecodeBool);
}
absl::Status ObjectReader::Quantity(absl::string_view key, dra::k8s::Quantity* out) {
  return Field(key, out, DecodeQuantity);
}
absl::Status ObjectReader::OptionalString(absl::string_view key, std::optional<std::string>* out) {
  return Optional(key, out, DecodeString);
}
absl::Status ObjectReader::OptionalInt64(absl::string_view key, std::optional<int64_t>* out) {
  return Optional(key, out, DecodeInt64);
}
absl::Status ObjectReader::OptionalInt32(absl::string_view key, std::optional<int32_t>* out) {
  return Optional(key, out, DecodeInt32);
}
absl::Status ObjectReader::OptionalBool(absl::string_view key, std::optional<bool>* out) {
  return Optional(key, out, DecodeBool);
}
absl::Status ObjectReader::StringList(absl::string_view key, std::vector<std::string>* out) {
  return List(key, out, DecodeString);
}
absl::Status ObjectReader::StringMap(absl::string_view key,
                                     std::map<std::string, std::string>* out) {
  return Map(key, out, DecodeString);
}
absl::Status ObjectReader::QuantityMap(absl::string_view key,
                                       std::map<std::string, dra::k8s::Quantity>* out) {
  return Map(key, out, DecodeQuantity);
}
absl::Status ObjectReader::Raw(absl::string_view key, nlohmann::json* out) {
  return Field(key, out, DecodeRaw);
}

nlohmann::json ObjectReader::UnknownFields() const {
  nlohmann::json unknown;  // null until the first unknown member
  if (object_ == nullptr) return unknown;
  for (const auto& [key, value] : object_->items()) {
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) unknown[key] = value;
  }
  return unknown;
}

nlohmann::json StartObject(const nlohmann::json& unknown_fields) {
  if (unknown_fields.is_object()) return unknown_fields;
  return nlohmann::json::object();
}

void PutString(nlohmann::json& obj, absl::string_view key, const std::string& value) {
  if (value.empty()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = value;
  }
}

void PutInt64(nlohmann::json& obj, absl::string_view key, int64_t value) {
  if (value == 0) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = value;
  }
}

void PutBool(nlohmann::json& obj, absl::string_view key, bool value) {
  if (!value) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = true;
  }
}

void PutOptionalString(nlohmann::json& obj, absl::string_view key,
                       const std::optional<std::string>& value) {
  if (!value.has_value()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = *value;
  }
}

void PutOptionalInt64(nlohmann::json& obj, absl::string_view key,
                      const std::optional<int64_t>& value) {
  if (!value.has_value()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = *value;
  }
}

void PutOptionalBool(nlohmann::json& obj, absl::string_view key, const std::optional<bool>& value) {
  if (!value.has_value()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = *value;
  }
}

void PutStringList(nlohmann::json& obj, absl::string_view key,
                   const std::vector<std::string>& value) {
  if (value.empty()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = value;
  }
}

void PutStringMap(nlohmann::json& obj, absl::string_view key,
                  const std::map<std::string, std::string>& value) {
  if (value.empty()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = value;
  }
}

void PutQuantityMap(nlohmann::json& obj, absl::string_view key,
                    const std::map<std::string, Quantity>& value) {
  PutMap(obj, key, value, [](const Quantity& q) { return nlohmann::json(q.ToString()); });
}

void PutRaw(nlohmann::json& obj, absl::string_view key, const nlohmann::json& value) {
  if (value.is_null()) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = value;
  }
}

void PutObject(nlohmann::json& obj, absl::string_view key, nlohmann::json value) {
  if (value.is_null() || (value.is_object() && value.empty())) {
    obj.erase(std::string(key));
  } else {
    obj[std::string(key)] = std::move(value);
  }
}

}  // namespace dra::k8s
