// GpuConfig: decode, normalize, validate, encode (docs/compatibility.md "Opaque configs").

#include <optional>
#include <string>

#include "lib/api/errors.h"
#include "lib/api/kinds_internal.h"
#include "lib/api/strict_json.h"
#include "lib/common/status.h"

namespace dra::api::internal {

absl::StatusOr<GpuConfig> DecodeGpuConfig(const nlohmann::json& root) {
  ASSIGN_OR_RETURN(StrictObject obj,
                   StrictObject::Open(root, "", {"apiVersion", "kind", "sharing"}));
  GpuConfig config;
  const nlohmann::json* j = obj.Get("sharing");
  if (j == nullptr) return config;
  ASSIGN_OR_RETURN(
      StrictObject sharing,
      StrictObject::Open(*j, "sharing", {"strategy", "timeSlicingConfig", "mpsConfig"}));
  GpuSharing s;
  ASSIGN_OR_RETURN(s.strategy, DecodeStrategy(sharing));
  ASSIGN_OR_RETURN(s.time_slicing_config, DecodeTimeSlicingConfig(sharing));
  ASSIGN_OR_RETURN(s.mps_config, DecodeMpsConfig(sharing));
  config.sharing = std::move(s);
  return config;
}

void NormalizeGpuConfig(GpuConfig& config) {
  if (!config.sharing.has_value()) return;
  GpuSharing& s = *config.sharing;
  if (s.strategy == SharingStrategy::kTimeSlicing && !s.time_slicing_config.has_value()) {
    s.time_slicing_config = TimeSlicingConfig{};
  }
  // The Go driver leaves `timeSlicingConfig: {}` without an interval and then panics in
  // Validate; the documented default is Default.
  NormalizeTimeSlicingConfig(s.time_slicing_config);
  if (s.strategy == SharingStrategy::kMps && !s.mps_config.has_value()) {
    s.mps_config = MpsConfig{};
  }
}

absl::Status ValidateGpuConfig(const GpuConfig& config, const FeatureGates& gates) {
  if (!config.sharing.has_value()) return absl::OkStatus();
  const GpuSharing& s = *config.sharing;
  RETURN_IF_ERROR(ValidateStrategyGate(s.strategy, "sharing.strategy", gates));
  switch (s.strategy) {
    case SharingStrategy::kTimeSlicing:
      // The interval is an enum, valid by construction. Go reports this one at prepare time.
      if (s.mps_config.has_value()) {
        return ConfigError("sharing.mpsConfig",
                           "cannot use MpsConfig with the 'TimeSlicing' strategy");
      }
      return absl::OkStatus();
    case SharingStrategy::kMps:
      RETURN_IF_ERROR(ValidateNoTimeSlicingConfigWithMps(s.time_slicing_config));
      if (s.mps_config.has_value()) return ValidateMpsConfig(*s.mps_config, "sharing.mpsConfig");
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void EncodeGpuConfig(const GpuConfig& config, nlohmann::json& out) {
  if (!config.sharing.has_value()) return;
  const GpuSharing& s = *config.sharing;
  nlohmann::json sharing = nlohmann::json::object();
  sharing["strategy"] = std::string(SharingStrategyName(s.strategy));
  if (s.time_slicing_config.has_value()) {
    sharing["timeSlicingConfig"] = EncodeTimeSlicingConfig(*s.time_slicing_config);
  }
  if (s.mps_config.has_value()) sharing["mpsConfig"] = EncodeMpsConfig(*s.mps_config);
  out["sharing"] = std::move(sharing);
}

}  // namespace dra::api::internal
