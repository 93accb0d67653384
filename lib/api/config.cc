// The decode -> normalize -> validate path over all kinds, and strict JSON text parsing.

#include "lib/api/config.h"

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"
#include "lib/api/kinds_internal.h"
#include "lib/api/strict_json.h"
#include "lib/common/status.h"

namespace dra::api {
namespace {

constexpr absl::string_view kKindList =
    "GpuConfig, MigDeviceConfig, VfioDeviceConfig, ComputeDomainChannelConfig, "
    "ComputeDomainDaemonConfig";

// Reads the required string member `key` of the root object.
absl::StatusOr<std::string> RequiredRootString(const nlohmann::json& root, absl::string_view key,
                                               absl::string_view expected) {
  auto it = root.find(std::string(key));
  if (it == root.end() || it->is_null()) {
    return ConfigError(key, absl::StrCat("required field is missing, expected ", expected));
  }
  if (!it->is_string()) return internal::TypeMismatch(key, "string", *it);
  return it->get<std::string>();
}

// Tracks object keys while nlohmann parses, to find duplicates (which nlohmann silently resolves
// to the last value, while Kubernetes' strict decoder rejects them).
class DuplicateKeyFinder {
 public:
  bool OnEvent(nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().count;
        frames_.push_back(Frame{.is_object = event == Event::object_start});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case Event::key:
        if (!frames_.empty() && parsed.is_string()) {
          Frame& top = frames_.back();
          top.key = parsed.get_ref<const std::string&>();
          if (!top.keys.insert(top.key).second && !duplicate_.has_value()) duplicate_ = Path();
        }
        break;
      case Event::value:
        if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().count;
        break;
    }
    return true;  // keep everything
  }

  // The path of the first duplicated key, if any.
  const std::optional<std::string>& Duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool is_object = false;
    std::set<std::string> keys;  // object: keys seen so far
    std::string key;             // object: the key being parsed
    size_t count = 0;            // array: elements begun so far
  };

  std::string Path() const {
    std::string path;
    for (const Frame& f : frames_) {
      path = f.is_object ? internal::MemberPath(path, f.key)
                         : absl::StrCat(path, "[", f.count == 0 ? 0 : f.count - 1, "]");
    }
    return path;
  }

  std::vector<Frame> frames_;
  std::optional<std::string> duplicate_;
};

}  // namespace

absl::StatusOr<Config> DecodeStrict(const nlohmann::json& parameters) {
  if (!parameters.is_object()) {
    return ConfigError(
        "", absl::StrCat("expected a JSON object, got ", internal::JsonTypeName(parameters)));
  }
  ASSIGN_OR_RETURN(std::string api_version,
                   RequiredRootString(parameters, "apiVersion", kApiVersion));
  if (api_version != kApiVersion) {
    return ConfigError("apiVersion", absl::StrCat("unsupported value \"", api_version,
                                                  "\", expected ", kApiVersion));
  }
  ASSIGN_OR_RETURN(std::string kind,
                   RequiredRootString(parameters, "kind", absl::StrCat("one of ", kKindList)));
  if (kind == kGpuConfigKind) return internal::DecodeGpuConfig(parameters);
  if (kind == kMigDeviceConfigKind) return internal::DecodeMigDeviceConfig(parameters);
  if (kind == kVfioDeviceConfigKind) return internal::DecodeVfioDeviceConfig(parameters);
  if (kind == kComputeDomainChannelConfigKind) {
    return internal::DecodeComputeDomainChannelConfig(parameters);
  }
  if (kind == kComputeDomainDaemonConfigKind) {
    return internal::DecodeComputeDomainDaemonConfig(parameters);
  }
  if (kind == "ComputeDomain" || kind == "ComputeDomainClique") {
    return ConfigError("kind", absl::StrCat(kind,
                                            " is a resource, not an opaque device "
                                            "configuration; expected one of ",
                                            kKindList));
  }
  return ConfigError("kind",
                     absl::StrCat("unknown kind \"", kind, "\", expected one of ", kKindList));
}

void Normalize(Config& config) {
  if (auto* c = std::get_if<GpuConfig>(&config)) internal::NormalizeGpuConfig(*c);
  if (auto* c = std::get_if<MigDeviceConfig>(&config)) internal::NormalizeMigDeviceConfig(*c);
  if (auto* c = std::get_if<VfioDeviceConfig>(&config)) internal::NormalizeVfioDeviceConfig(*c);
  // ComputeDomain*Config: nothing to default.
}

absl::Status Validate(const Config& config, const FeatureGates& gates) {
  if (const auto* c = std::get_if<GpuConfig>(&config))
    return internal::ValidateGpuConfig(*c, gates);
  if (const auto* c = std::get_if<MigDeviceConfig>(&config)) {
    return internal::ValidateMigDeviceConfig(*c, gates);
  }
  if (const auto* c = std::get_if<VfioDeviceConfig>(&config)) {
    return internal::ValidateVfioDeviceConfig(*c);
  }
  if (const auto* c = std::get_if<ComputeDomainChannelConfig>(&config)) {
    return internal::ValidateComputeDomainChannelConfig(*c);
  }
  if (const auto* c = std::get_if<ComputeDomainDaemonConfig>(&config)) {
    return internal::ValidateComputeDomainDaemonConfig(*c);
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> DecodeOpaqueConfig(const nlohmann::json& parameters,
                                          const FeatureGates& gates) {
  ASSIGN_OR_RETURN(Config config, DecodeStrict(parameters));
  Normalize(config);
  RETURN_IF_ERROR(Validate(config, gates));
  return config;
}

absl::StatusOr<nlohmann::json> ParseJsonStrict(absl::string_view text) {
  DuplicateKeyFinder finder;
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(
        text.begin(), text.end(),
        [&finder](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& value) {
          return finder.OnEvent(event, value);
        });
  } catch (const nlohmann::json::exception& e) {
    return ConfigError("", absl::StrCat("invalid JSON: ", e.what()));
  }
  if (finder.Duplicate().has_value()) return ConfigError(*finder.Duplicate(), "duplicate field");
  return parsed;
}

absl::StatusOr<Config> DecodeOpaqueConfigText(absl::string_view text, const FeatureGates& gates) {
  ASSIGN_OR_RETURN(nlohmann::json parameters, ParseJsonStrict(text));
  return DecodeOpaqueConfig(parameters, gates);
}

nlohmann::json EncodeConfig(const Config& config) {
  nlohmann::json out = nlohmann::json::object();
  out["apiVersion"] = std::string(kApiVersion);
  out["kind"] = std::string(KindName(config));
  if (const auto* c = std::get_if<GpuConfig>(&config)) internal::EncodeGpuConfig(*c, out);
  if (const auto* c = std::get_if<MigDeviceConfig>(&config)) {
    internal::EncodeMigDeviceConfig(*c, out);
  }
  if (const auto* c = std::get_if<VfioDeviceConfig>(&config)) {
    internal::EncodeVfioDeviceConfig(*c, out);
  }
  if (const auto* c = std::get_if<ComputeDomainChannelConfig>(&config)) {
    internal::EncodeComputeDomainChannelConfig(*c, out);
  }
  if (const auto* c = std::get_if<ComputeDomainDaemonConfig>(&config)) {
    internal::EncodeComputeDomainDaemonConfig(*c, out);
  }
  return out;
}

}  // namespace dra::api
