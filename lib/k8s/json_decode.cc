#include "lib/k8s/json_decode.h"

#include <algorithm>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dra::k8s {

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
      return "bool";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "int";
    case nlohmann::json::value_t::number_float:
      return "number";
    default:
      return "binary";
  }
}

std::string FieldPath(absl::string_view parent, absl::string_view key) {
  if (parent.empty()) return std::string(key);
  return absl::StrCat(parent, ".", key);
}

std::string IndexPath(absl::string_view parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

std::string KeyPath(absl::string_view parent, absl::string_view key) {
  return absl::StrFormat("%s[\"%s\"]", parent, key);
}

absl::Status TypeError(absl::string_view path, absl::string_view expected,
                       const nlohmann::json& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": expected ", expected, ", got ", JsonTypeName(got)));
}

absl::Status DecodeString(const nlohmann::json& j, const std::string& path, std::string* out) {
  if (!j.is_string()) return TypeError(path, "string", j);
  *out = j.get_ref<const std::string&>();
  return absl::OkStatus();
}

absl::Status DecodeInt64(const nlohmann::json& j, const std::string& path, int64_t* out) {
  if (j.is_number_unsigned()) {
    uint64_t value = j.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", value, " does not fit a 64-bit signed integer"));
    }
    *out = static_cast<int64_t>(value);
    return absl::OkStatus();
  }
  if (!j.is_number_integer()) return TypeError(path, "int", j);
  *out = j.get<int64_t>();
  return absl::OkStatus();
}

absl::Status DecodeInt32(const nlohmann::json& j, const std::string& path, int32_t* out) {
  int64_t value = 0;
  RETURN_IF_ERROR(DecodeInt64(j, path, &value));
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", value, " does not fit a 32-bit signed integer"));
  }
  *out = static_cast<int32_t>(value);
  return absl::OkStatus();
}

absl::Status DecodeBool(const nlohmann::json& j, const std::string& path, bool* out) {
  if (!j.is_boolean()) return TypeError(path, "bool", j);
  *out = j.get<bool>();
  return absl::OkStatus();
}

absl::Status DecodeQuantity(const nlohmann::json& j, const std::string& path, Quantity* out) {
  absl::StatusOr<Quantity> parsed;
  if (j.is_string()) {
    parsed = Quantity::Parse(j.get_ref<const std::string&>());
  } else if (j.is_number()) {
    parsed = Quantity::Parse(j.dump());
  } else {
    return TypeError(path, "quantity string", j);
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
  if (!j.is_object()) {
    if (path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("expected object, got ", JsonTypeName(j)));
    }
    return TypeError(path, "object", j);
  }
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
