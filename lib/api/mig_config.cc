// MigDeviceConfig: decode, normalize, validate, encode (docs/compatibility.md "Opaque configs").

#include <string>

#include "lib/api/kinds_internal.h"
#include "lib/api/strict_json.h"
#include "lib/common/status.h"

namespace dra::api::internal {

absl::StatusOr<MigDeviceConfig> DecodeMigDeviceConfig(const nlohmann::json& root) {
  ASSIGN_OR_RETURN(StrictObject obj,
                   StrictObject::Open(root, "", {"apiVersion", "kind", "sharing"}));
  MigDeviceConfig config;
  const nlohmann::json* j = obj.Get("sharing");
  if (j == nullptr) return config;
  // The same fields and rules as GpuConfig.sharing; the interval applies to the parent GPU
  // (lib/gpuplugin/timeslicing/time_slicing.h).
  ASSIGN_OR_RETURN(
      StrictObject sharing,
      StrictObject::Open(*j, "sharing", {"strategy", "timeSlicingConfig", "mpsConfig"}));
  MigDeviceSharing s;
  ASSIGN_OR_RETURN(s.strategy, DecodeStrategy(sharing));
  ASSIGN_OR_RETURN(s.time_slicing_config, DecodeTimeSlicingConfig(sharing));
  ASSIGN_OR_RETURN(s.mps_config, DecodeMpsConfig(sharing));
  config.sharing = std::move(s);
  return config;
}

void NormalizeMigDeviceConfig(MigDeviceConfig& config) {
  if (!config.sharing.has_value()) return;
  MigDeviceSharing& s = *config.sharing;
  if (s.strategy == SharingStrategy::kMps && !s.mps_config.has_value()) s.mps_config = MpsConfig{};
  // Unlike GpuConfig, an absent timeSlicingConfig stays absent: a MigDeviceConfig written for the
  // public driver (which has no such field) keeps meaning "leave the parent GPU's interval alone".
  NormalizeTimeSlicingConfig(s.time_slicing_config);
}

absl::Status ValidateMigDeviceConfig(const MigDeviceConfig& config, const FeatureGates& gates) {
  if (!config.sharing.has_value()) return absl::OkStatus();
  const MigDeviceSharing& s = *config.sharing;
  RETURN_IF_ERROR(ValidateStrategyGate(s.strategy, "sharing.strategy", gates));
  // TimeSlicing: the interval, if any, goes to the parent GPU at prepare. An mpsConfig next to it
  // is ignored, as in the Go driver (rejecting it would break manifests that work there).
  if (s.strategy == SharingStrategy::kMps) {
    RETURN_IF_ERROR(ValidateNoTimeSlicingConfigWithMps(s.time_slicing_config));
    if (s.mps_config.has_value()) return ValidateMpsConfig(*s.mps_config, "sharing.mpsConfig");
  }
  return absl::OkStatus();
}

void EncodeMigDeviceConfig(const MigDeviceConfig& config, nlohmann::json& out) {
  if (!config.sharing.has_value()) return;
  nlohmann::json sharing = nlohmann::json::object();
  sharing["strategy"] = std::string(SharingStrategyName(config.sharing->strategy));
  if (config.sharing->time_slicing_config.has_value()) {
    sharing["timeSlicingConfig"] = EncodeTimeSlicingConfig(*config.sharing->time_slicing_config);
  }
  if (config.sharing->mps_config.has_value()) {
    sharing["mpsConfig"] = EncodeMpsConfig(*config.sharing->mps_config);
  }
  out["sharing"] = std::move(sharing);
}

}  // namespace dra::api::internal
