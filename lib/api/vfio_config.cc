// VfioDeviceConfig: decode, normalize, validate, encode (docs/compatibility.md "Opaque configs").
//
// No feature gate is checked here, as in the Go driver: VfioDeviceConfig is accepted by every
// caller (the Go webhook's rejection of it is a bug), and `enableAPIDevice` is not gated by
// DeviceMetadata in the Go code whatever its docs say. Without PassthroughSupport there are no
// VFIO devices, so the plugin's type check rejects a VfioDeviceConfig aimed at a GPU request.

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"
#include "lib/api/kinds_internal.h"
#include "lib/api/strict_json.h"
#include "lib/common/status.h"

namespace dra::api::internal {

absl::StatusOr<VfioDeviceConfig> DecodeVfioDeviceConfig(const nlohmann::json& root) {
  ASSIGN_OR_RETURN(StrictObject obj, StrictObject::Open(root, "", {"apiVersion", "kind", "iommu"}));
  VfioDeviceConfig config;
  const nlohmann::json* j = obj.Get("iommu");
  if (j == nullptr) return config;
  ASSIGN_OR_RETURN(StrictObject iommu,
                   StrictObject::Open(*j, "iommu", {"backendPolicy", "enableAPIDevice"}));
  IommuConfig c;
  std::optional<std::string> policy;
  RETURN_IF_ERROR(iommu.GetString("backendPolicy", &policy));
  // "" is the Go zero value, which Normalize turns into LegacyOnly.
  if (policy.has_value() && !policy->empty()) {
    c.backend_policy = ParseIommuBackendPolicy(*policy);
    if (!c.backend_policy.has_value()) {
      return ConfigError(iommu.PathOf("backendPolicy"),
                         absl::StrCat("unknown IOMMU backend policy: ", *policy,
                                      ", supported IOMMU backend policies: LegacyOnly, "
                                      "PreferIommuFD"));
    }
  }
  RETURN_IF_ERROR(iommu.GetBool("enableAPIDevice", &c.enable_api_device));
  config.iommu = c;
  return config;
}

void NormalizeVfioDeviceConfig(VfioDeviceConfig& config) {
  if (!config.iommu.has_value()) config.iommu = IommuConfig{};
  if (!config.iommu->backend_policy.has_value()) {
    config.iommu->backend_policy = IommuBackendPolicy::kLegacyOnly;
  }
  if (!config.iommu->enable_api_device.has_value()) config.iommu->enable_api_device = false;
}

absl::Status ValidateVfioDeviceConfig(const VfioDeviceConfig& config) {
  // The policy is an enum, valid by construction (decode rejected anything else).
  return absl::OkStatus();
}

void EncodeVfioDeviceConfig(const VfioDeviceConfig& config, nlohmann::json& out) {
  if (!config.iommu.has_value()) return;
  nlohmann::json iommu = nlohmann::json::object();
  // Go: `backendPolicy` has no omitempty, so its zero value "" is written when unset.
  iommu["backendPolicy"] = config.iommu->backend_policy.has_value()
                               ? std::string(IommuBackendPolicyName(*config.iommu->backend_policy))
                               : std::string();
  if (config.iommu->enable_api_device.has_value()) {
    iommu["enableAPIDevice"] = *config.iommu->enable_api_device;
  }
  out["iommu"] = std::move(iommu);
}

}  // namespace dra::api::internal
