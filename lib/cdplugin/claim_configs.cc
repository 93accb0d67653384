#include "lib/cdplugin/claim_configs.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/api/config.h"
#include "lib/cdplugin/errors.h"
#include "lib/common/json_access.h"
#include "lib/common/status.h"
#include "lib/kubeletplugin/driver.h"

namespace dra::cdplugin {
namespace {

using CdConfig = std::variant<api::ComputeDomainChannelConfig, api::ComputeDomainDaemonConfig>;

struct Entry {
  std::vector<std::string> requests;
  CdConfig config;
};

constexpr char kUnknownField[] = ": unknown field, allowed fields: ";

// The decoder's "<path>: unknown field, allowed fields: a, b" as the Kubernetes strict decoder
// words it (what users of the Go driver see and search for), keeping the allowed fields.
absl::Status StrictDecodingError(const absl::Status& s, size_t index) {
  const std::string msg(s.message());
  const size_t at = msg.find(kUnknownField);
  std::string text;
  if (at != std::string::npos) {
    text = absl::StrCat("strict decoding error: unknown field \"", msg.substr(0, at),
                        "\" (allowed fields: ", msg.substr(at + sizeof(kUnknownField) - 1), ")");
  } else {
    text = absl::StrCat("strict decoding error: ", msg);
  }
  return MakePermanent(absl::InvalidArgumentError(
      absl::StrCat("status.allocation.devices.config[", index, "].opaque.parameters: ", text)));
}

// Lenient decoding keeps only the members the two kinds define.
nlohmann::json KnownMembers(const nlohmann::json& parameters) {
  if (!parameters.is_object()) return parameters;
  nlohmann::json out = nlohmann::json::object();
  for (const char* key : {"apiVersion", "kind", "domainID", "allocationMode"}) {
    if (parameters.contains(key)) out[key] = parameters.at(key);
  }
  if (json_access::StringOr(out, "kind") != api::kComputeDomainChannelConfigKind) {
    out.erase("allocationMode");
  }
  return out;
}

absl::StatusOr<std::optional<Entry>> DecodeEntry(const k8s::DeviceAllocationConfiguration& c,
                                                 size_t index, bool strict) {
  if (!c.opaque.has_value()) {
    return MakePermanent(absl::InvalidArgumentError(absl::StrCat(
        "status.allocation.devices.config[", index, "]: only opaque parameters are supported")));
  }
  if (c.opaque->driver != kDriverName) return std::optional<Entry>();
  absl::StatusOr<api::Config> decoded =
      api::DecodeStrict(strict ? c.opaque->parameters : KnownMembers(c.opaque->parameters));
  if (!decoded.ok()) return StrictDecodingError(decoded.status(), index);
  Entry e{.requests = c.requests, .config = {}};
  if (auto* ch = std::get_if<api::ComputeDomainChannelConfig>(&*decoded)) {
    e.config = *ch;
  } else if (auto* d = std::get_if<api::ComputeDomainDaemonConfig>(&*decoded)) {
    e.config = *d;
  } else {
    return MakePermanent(absl::InvalidArgumentError(absl::StrCat(
        "status.allocation.devices.config[", index,
        "].opaque.parameters.kind: ", api::KindName(*decoded), " is not a config of driver ",
        kDriverName, " (allowed: ComputeDomainChannelConfig, ComputeDomainDaemonConfig)")));
  }
  return std::optional<Entry>(std::move(e));
}

bool Fits(const CdConfig& config, DeviceType type) {
  return (type == DeviceType::kChannel) ==
         std::holds_alternative<api::ComputeDomainChannelConfig>(config);
}

const char* KindName(const CdConfig& config) {
  return std::holds_alternative<api::ComputeDomainChannelConfig>(config)
             ? "ComputeDomainChannelConfig"
             : "ComputeDomainDaemonConfig";
}

bool Names(const Entry& e, const std::string& request) {
  const std::string base = kubeletplugin::BaseRequestName(request);
  for (const std::string& r : e.requests) {
    if (r == request || r == base) return true;
  }
  return false;
}

absl::StatusOr<std::pair<DeviceType, int>> ParseDevice(const std::string& name) {
  for (auto [prefix, type] :
       {std::pair{"channel-", DeviceType::kChannel}, std::pair{"daemon-", DeviceType::kDaemon}}) {
    int id = 0;
    if (absl::StartsWith(name, prefix) &&
        absl::SimpleAtoi(absl::string_view(name).substr(std::string(prefix).size()), &id) &&
        id >= 0) {
      return std::pair{type, id};
    }
  }
  return MakePermanent(absl::InvalidArgumentError(
      absl::StrCat("requested device is not allocatable: ", name,
                   " (this driver publishes channel-<n> and daemon-<n> devices only)")));
}

}  // namespace

const std::string& ConfiguredDevice::domain_id() const {
  return std::visit([](const auto& c) -> const std::string& { return c.domain_id; }, config);
}

const char* DeviceTypeName(DeviceType type) {
  return type == DeviceType::kChannel ? "channel" : "daemon";
}

absl::StatusOr<std::vector<ConfiguredDevice>> ConfigureDevices(
    const k8s::AllocationResult& allocation, bool strict) {
  std::vector<Entry> entries = {{{}, api::ComputeDomainChannelConfig{}},
                                {{}, api::ComputeDomainDaemonConfig{}}};
  const auto& configs = allocation.devices.config;
  for (const char* source : {"FromClass", "FromClaim"}) {
    for (size_t i = 0; i < configs.size(); ++i) {
      if (configs[i].source != source) continue;
      ASSIGN_OR_RETURN(std::optional<Entry> e, DecodeEntry(configs[i], i, strict));
      if (e.has_value()) entries.push_back(*std::move(e));
    }
  }
  std::vector<ConfiguredDevice> out;
  for (const k8s::DeviceRequestAllocationResult& r : allocation.devices.results) {
    if (r.driver != kDriverName) continue;
    ASSIGN_OR_RETURN(auto type_id, ParseDevice(r.device));
    const Entry* chosen = nullptr;
    for (auto it = entries.rbegin(); it != entries.rend() && chosen == nullptr; ++it) {
      if (!Names(*it, r.request)) continue;
      if (!Fits(it->config, type_id.first)) {
        return MakePermanent(absl::InvalidArgumentError(
            absl::StrCat("cannot apply ", KindName(it->config), " to request ", r.request,
                         " (device ", r.device, ")")));
      }
      chosen = &*it;
    }
    for (auto it = entries.rbegin(); it != entries.rend() && chosen == nullptr; ++it) {
      if (it->requests.empty() && Fits(it->config, type_id.first)) chosen = &*it;
    }
    ConfiguredDevice d{
        .result = r, .type = type_id.first, .id = type_id.second, .config = chosen->config};
    if (d.domain_id().empty()) {
      return MakePermanent(absl::InvalidArgumentError(
          absl::StrCat("request ", r.request, " (device ", r.device, "): ", KindName(d.config),
                       ": domainID cannot be empty")));
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace dra::cdplugin
