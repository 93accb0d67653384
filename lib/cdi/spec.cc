#include "lib/cdi/spec.h"

#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::cdi {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// ---- encoding ----

void PutStrings(OrderedJson& out, const char* key, const std::vector<std::string>& values) {
  if (!values.empty()) out[key] = values;
}

OrderedJson EditsToJson(const ContainerEdits& edits) {
  OrderedJson out = OrderedJson::object();
  PutStrings(out, "env", edits.env);
  if (!edits.device_nodes.empty()) {
    OrderedJson& nodes = out["deviceNodes"] = OrderedJson::array();
    for (const DeviceNode& d : edits.device_nodes) {
      OrderedJson n = OrderedJson::object();
      n["path"] = d.path;
      if (!d.host_path.empty()) n["hostPath"] = d.host_path;
      if (!d.type.empty()) n["type"] = d.type;
      if (d.major) n["major"] = *d.major;
      if (d.minor) n["minor"] = *d.minor;
      if (d.file_mode) n["fileMode"] = *d.file_mode;
      if (!d.permissions.empty()) n["permissions"] = d.permissions;
      if (d.uid) n["uid"] = *d.uid;
      if (d.gid) n["gid"] = *d.gid;
      nodes.push_back(std::move(n));
    }
  }
  if (!edits.hooks.empty()) {
    OrderedJson& hooks = out["hooks"] = OrderedJson::array();
    for (const Hook& h : edits.hooks) {
      OrderedJson j = OrderedJson::object();
      j["hookName"] = h.hook_name;
      j["path"] = h.path;
      PutStrings(j, "args", h.args);
      PutStrings(j, "env", h.env);
      if (h.timeout) j["timeout"] = *h.timeout;
      hooks.push_back(std::move(j));
    }
  }
  if (!edits.mounts.empty()) {
    OrderedJson& mounts = out["mounts"] = OrderedJson::array();
    for (const Mount& m : edits.mounts) {
      OrderedJson j = OrderedJson::object();
      j["hostPath"] = m.host_path;
      j["containerPath"] = m.container_path;
      PutStrings(j, "options", m.options);
      if (!m.type.empty()) j["type"] = m.type;
      mounts.push_back(std::move(j));
    }
  }
  if (!edits.additional_gids.empty()) out["additionalGids"] = edits.additional_gids;
  return out;
}

// ---- decoding ----

std::string TypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    default:
      return "unsupported value";
  }
}

absl::Status TypeError(const std::string& path, absl::string_view expected, const Json& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": expected ", expected, ", got ", TypeName(got)));
}

std::string Field(const std::string& parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

std::string Index(const std::string& parent, size_t i) { return absl::StrCat(parent, "[", i, "]"); }

absl::Status DecodeString(const Json& j, const std::string& path, std::string* out) {
  if (!j.is_string()) return TypeError(path, "string", j);
  *out = j.get_ref<const std::string&>();
  return absl::OkStatus();
}

// Integers within [lo, hi]; floats are rejected even when integral ("1.0"), like Go's decoder.
template <typename T>
absl::Status DecodeInteger(const Json& j, const std::string& path, T* out) {
  if (!j.is_number_integer()) return TypeError(path, "integer", j);
  constexpr auto kLo = std::numeric_limits<T>::min();
  constexpr auto kHi = std::numeric_limits<T>::max();
  bool in_range;
  if (j.is_number_unsigned()) {
    in_range = j.get<uint64_t>() <= static_cast<uint64_t>(kHi);
  } else {
    const int64_t v = j.get<int64_t>();
    in_range = v >= static_cast<int64_t>(kLo) &&
               (v < 0 || static_cast<uint64_t>(v) <= static_cast<uint64_t>(kHi));
  }
  if (!in_range) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", j.dump(), " is out of range [", kLo, ", ", kHi, "]"));
  }
  *out =
      j.is_number_unsigned() ? static_cast<T>(j.get<uint64_t>()) : static_cast<T>(j.get<int64_t>());
  return absl::OkStatus();
}

template <typename T>
absl::Status DecodeOptionalInteger(const Json& j, const std::string& path, std::optional<T>* out) {
  T v{};
  RETURN_IF_ERROR(DecodeInteger(j, path, &v));
  *out = v;
  return absl::OkStatus();
}

template <typename T, typename Fn>
absl::Status DecodeArray(const Json& j, const std::string& path, std::vector<T>* out, Fn decode) {
  if (!j.is_array()) return TypeError(path, "array", j);
  out->clear();
  out->reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    T item{};
    RETURN_IF_ERROR(decode(j[i], Index(path, i), &item));
    out->push_back(std::move(item));
  }
  return absl::OkStatus();
}

absl::Status DecodeStrings(const Json& j, const std::string& path, std::vector<std::string>* out) {
  return DecodeArray(j, path, out, DecodeString);
}

absl::Status DecodeStringMap(const Json& j, const std::string& path,
                             std::map<std::string, std::string>* out) {
  if (!j.is_object()) return TypeError(path, "object", j);
  for (const auto& [key, value] : j.items()) {
    if (!value.is_string()) {
      return TypeError(absl::StrCat(path, "[\"", key, "\"]"), "string", value);
    }
    (*out)[key] = value.get<std::string>();
  }
  return absl::OkStatus();
}

// Visits each member of a JSON object with fn(key, value, path) and rejects keys fn does not
// know (fn returns NotFound for them). A null member is treated like an absent one, as Go does.
template <typename Fn>
absl::Status ForEachMember(const Json& j, const std::string& path, Fn fn) {
  if (!j.is_object()) return TypeError(path.empty() ? "spec" : path, "object", j);
  for (const auto& [key, value] : j.items()) {
    if (value.is_null()) continue;
    const std::string child = Field(path, key);
    absl::Status status = fn(key, value, child);
    if (absl::IsNotFound(status)) {
      return absl::InvalidArgumentError(absl::StrCat(child, ": unknown field"));
    }
    RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

absl::Status Unknown() { return absl::NotFoundError(""); }

absl::Status Unsupported(const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not supported by this implementation"));
}

absl::Status DecodeDeviceNode(const Json& j, const std::string& path, DeviceNode* out) {
  return ForEachMember(j, path, [&](const std::string& key, const Json& v, const std::string& p) {
    if (key == "path") return DecodeString(v, p, &out->path);
    if (key == "hostPath") return DecodeString(v, p, &out->host_path);
    if (key == "type") return DecodeString(v, p, &out->type);
    if (key == "major") return DecodeOptionalInteger(v, p, &out->major);
    if (key == "minor") return DecodeOptionalInteger(v, p, &out->minor);
    if (key == "fileMode") return DecodeOptionalInteger(v, p, &out->file_mode);
    if (key == "permissions") return DecodeString(v, p, &out->permissions);
    if (key == "uid") return DecodeOptionalInteger(v, p, &out->uid);
    if (key == "gid") return DecodeOptionalInteger(v, p, &out->gid);
    return Unknown();
  });
}

absl::Status DecodeMount(const Json& j, const std::string& path, Mount* out) {
  return ForEachMember(j, path, [&](const std::string& key, const Json& v, const std::string& p) {
    if (key == "hostPath") return DecodeString(v, p, &out->host_path);
    if (key == "containerPath") return DecodeString(v, p, &out->container_path);
    if (key == "type") return DecodeString(v, p, &out->type);
    if (key == "options") return DecodeStrings(v, p, &out->options);
    return Unknown();
  });
}

absl::Status DecodeHook(const Json& j, const std::string& path, Hook* out) {
  return ForEachMember(j, path, [&](const std::string& key, const Json& v, const std::string& p) {
    if (key == "hookName") return DecodeString(v, p, &out->hook_name);
    if (key == "path") return DecodeString(v, p, &out->path);
    if (key == "args") return DecodeStrings(v, p, &out->args);
    if (key == "env") return DecodeStrings(v, p, &out->env);
    if (key == "timeout") return DecodeOptionalInteger(v, p, &out->timeout);
    return Unknown();
  });
}

absl::Status DecodeEdits(const Json& j, const std::string& path, ContainerEdits* out) {
  return ForEachMember(j, path, [&](const std::string& key, const Json& v, const std::string& p) {
    if (key == "env") return DecodeStrings(v, p, &out->env);
    if (key == "deviceNodes") return DecodeArray(v, p, &out->device_nodes, DecodeDeviceNode);
    if (key == "hooks") return DecodeArray(v, p, &out->hooks, DecodeHook);
    if (key == "mounts") return DecodeArray(v, p, &out->mounts, DecodeMount);
    if (key == "additionalGids") {
      return DecodeArray(v, p, &out->additional_gids, DecodeInteger<uint32_t>);
    }
    if (key == "intelRdt" || key == "netDevices") return Unsupported(p);
    return Unknown();
  });
}

absl::Status DecodeDevice(const Json& j, const std::string& path, Device* out) {
  return ForEachMember(j, path, [&](const std::string& key, const Json& v, const std::string& p) {
    if (key == "name") return DecodeString(v, p, &out->name);
    if (key == "annotations") return DecodeStringMap(v, p, &out->annotations);
    if (key == "containerEdits") return DecodeEdits(v, p, &out->container_edits);
    return Unknown();
  });
}

}  // namespace

void ContainerEdits::Append(const ContainerEdits& other) {
  env.insert(env.end(), other.env.begin(), other.env.end());
  device_nodes.insert(device_nodes.end(), other.device_nodes.begin(), other.device_nodes.end());
  hooks.insert(hooks.end(), other.hooks.begin(), other.hooks.end());
  mounts.insert(mounts.end(), other.mounts.begin(), other.mounts.end());
  additional_gids.insert(additional_gids.end(), other.additional_gids.begin(),
                         other.additional_gids.end());
}

nlohmann::ordered_json SpecToJson(const Spec& spec) {
  OrderedJson out = OrderedJson::object();
  out["cdiVersion"] = spec.version;
  out["kind"] = spec.kind;
  if (!spec.annotations.empty()) out["annotations"] = spec.annotations;
  OrderedJson& devices = out["devices"] = OrderedJson::array();
  for (const Device& d : spec.devices) {
    OrderedJson j = OrderedJson::object();
    j["name"] = d.name;
    if (!d.annotations.empty()) j["annotations"] = d.annotations;
    j["containerEdits"] = EditsToJson(d.container_edits);
    devices.push_back(std::move(j));
  }
  if (!spec.container_edits.empty()) out["containerEdits"] = EditsToJson(spec.container_edits);
  return out;
}

std::string EncodeSpec(const Spec& spec) {
  std::string text = SpecToJson(spec).dump(2, ' ', false, Json::error_handler_t::replace);
  text += '\n';
  return text;
}

absl::StatusOr<Spec> DecodeSpec(absl::string_view json_text) {
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::parse_error& e) {
    // e.what() reads "[json.exception...] parse error at line L, column C: <reason>"; keep the
    // reason and report the byte offset, which is what a hex dump of a corrupt file needs.
    std::string what = e.what();
    if (size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    // nlohmann counts bytes from 1; report the 0-based offset (the size for a truncation).
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON at byte ", e.byte > 0 ? e.byte - 1 : 0, ": ", what));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", e.what()));
  }
  Spec spec;
  absl::Status status =
      ForEachMember(root, "", [&](const std::string& key, const Json& v, const std::string& p) {
        if (key == "cdiVersion") return DecodeString(v, p, &spec.version);
        if (key == "kind") return DecodeString(v, p, &spec.kind);
        if (key == "annotations") return DecodeStringMap(v, p, &spec.annotations);
        if (key == "devices") return DecodeArray(v, p, &spec.devices, DecodeDevice);
        if (key == "containerEdits") return DecodeEdits(v, p, &spec.container_edits);
        return Unknown();
      });
  if (!status.ok()) return status;
  return spec;
}

}  // namespace dra::cdi
