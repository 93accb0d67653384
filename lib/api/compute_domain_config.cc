// ComputeDomainChannelConfig and ComputeDomainDaemonConfig (docs/compatibility.md "Opaque
// configs"): decode, validate, encode. Normalize is a no-op for both, as in the Go driver.
//
// allocationMode is not validated (Go does not either: anything but "All" means one channel).
// An empty domainID is a permanent error here; the Go compute-domain plugin retries it, which
// can never succeed.

#include <optional>
#include <string>

#include "lib/api/errors.h"
#include "lib/api/kinds_internal.h"
#include "lib/api/strict_json.h"
#include "lib/common/status.h"

namespace dra::api::internal {

absl::StatusOr<ComputeDomainChannelConfig> DecodeComputeDomainChannelConfig(
    const nlohmann::json& root) {
  ASSIGN_OR_RETURN(
      StrictObject obj,
      StrictObject::Open(root, "", {"apiVersion", "kind", "domainID", "allocationMode"}));
  ComputeDomainChannelConfig config;
  std::optional<std::string> value;
  RETURN_IF_ERROR(obj.GetString("domainID", &value));
  config.domain_id = value.value_or("");
  value.reset();
  RETURN_IF_ERROR(obj.GetString("allocationMode", &value));
  config.allocation_mode = value.value_or("");
  return config;
}

absl::Status ValidateComputeDomainChannelConfig(const ComputeDomainChannelConfig& config) {
  if (config.domain_id.empty()) return ConfigError("domainID", "domainID cannot be empty");
  return absl::OkStatus();
}

void EncodeComputeDomainChannelConfig(const ComputeDomainChannelConfig& config,
                                      nlohmann::json& out) {
  out["domainID"] = config.domain_id;  // no omitempty in Go
  if (!config.allocation_mode.empty()) out["allocationMode"] = config.allocation_mode;
}

absl::StatusOr<ComputeDomainDaemonConfig> DecodeComputeDomainDaemonConfig(
    const nlohmann::json& root) {
  ASSIGN_OR_RETURN(StrictObject obj,
                   StrictObject::Open(root, "", {"apiVersion", "kind", "domainID"}));
  ComputeDomainDaemonConfig config;
  std::optional<std::string> value;
  RETURN_IF_ERROR(obj.GetString("domainID", &value));
  config.domain_id = value.value_or("");
  return config;
}

absl::Status ValidateComputeDomainDaemonConfig(const ComputeDomainDaemonConfig& config) {
  if (config.domain_id.empty()) return ConfigError("domainID", "domainID cannot be empty");
  return absl::OkStatus();
}

void EncodeComputeDomainDaemonConfig(const ComputeDomainDaemonConfig& config, nlohmann::json& out) {
  out["domainID"] = config.domain_id;
}

}  // namespace dra::api::internal
