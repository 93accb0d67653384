#pragma once

// Internal to lib/api: the per-kind pieces that config.cc dispatches to. Decoders take the root
// parameters object (apiVersion and kind already checked by the caller) and reject unknown
// fields; validators return permanent config errors whose message starts with the field path.

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/api/strict_json.h"
#include "lib/api/types.h"
#include "lib/common/feature_gates.h"
#include "nlohmann/json.hpp"

namespace dra::api::internal {

// ---- sharing pieces shared by GpuConfig and MigDeviceConfig (sharing.cc) ----
//
// Both kinds decode `sharing.timeSlicingConfig` and `sharing.mpsConfig` with the same rules and
// messages; what a MigDeviceConfig's interval means at prepare is in
// lib/gpuplugin/timeslicing/time_slicing.h.

// `sharing.strategy`: required; exactly "TimeSlicing" or "MPS".
absl::StatusOr<SharingStrategy> DecodeStrategy(const StrictObject& sharing);
absl::StatusOr<std::optional<MpsConfig>> DecodeMpsConfig(const StrictObject& sharing);
// `sharing.timeSlicingConfig`: absent stays absent; `interval` one of Default, Short, Medium, Long.
absl::StatusOr<std::optional<TimeSlicingConfig>> DecodeTimeSlicingConfig(
    const StrictObject& sharing);
// A present timeSlicingConfig without an interval gets interval Default.
void NormalizeTimeSlicingConfig(std::optional<TimeSlicingConfig>& config);
// Strategy MPS: a timeSlicingConfig is an error ("sharing.timeSlicingConfig: cannot use
// TimeSlicingConfig with the 'MPS' strategy").
absl::Status ValidateNoTimeSlicingConfigWithMps(const std::optional<TimeSlicingConfig>& config);
nlohmann::json EncodeTimeSlicingConfig(const TimeSlicingConfig& config);
// The strategy's feature gate must be on (TimeSlicingSettings, MPSSupport).
absl::Status ValidateStrategyGate(SharingStrategy strategy, absl::string_view path,
                                  const FeatureGates& gates);
// `path` is the path of the mpsConfig object.
absl::Status ValidateMpsConfig(const MpsConfig& mps, absl::string_view path);
nlohmann::json EncodeMpsConfig(const MpsConfig& mps);

// ---- kinds ----

absl::StatusOr<GpuConfig> DecodeGpuConfig(const nlohmann::json& root);
void NormalizeGpuConfig(GpuConfig& config);
absl::Status ValidateGpuConfig(const GpuConfig& config, const FeatureGates& gates);
void EncodeGpuConfig(const GpuConfig& config, nlohmann::json& out);

absl::StatusOr<MigDeviceConfig> DecodeMigDeviceConfig(const nlohmann::json& root);
void NormalizeMigDeviceConfig(MigDeviceConfig& config);
absl::Status ValidateMigDeviceConfig(const MigDeviceConfig& config, const FeatureGates& gates);
void EncodeMigDeviceConfig(const MigDeviceConfig& config, nlohmann::json& out);

absl::StatusOr<VfioDeviceConfig> DecodeVfioDeviceConfig(const nlohmann::json& root);
void NormalizeVfioDeviceConfig(VfioDeviceConfig& config);
absl::Status ValidateVfioDeviceConfig(const VfioDeviceConfig& config);
void EncodeVfioDeviceConfig(const VfioDeviceConfig& config, nlohmann::json& out);

absl::StatusOr<ComputeDomainChannelConfig> DecodeComputeDomainChannelConfig(
    const nlohmann::json& root);
absl::Status ValidateComputeDomainChannelConfig(const ComputeDomainChannelConfig& config);
void EncodeComputeDomainChannelConfig(const ComputeDomainChannelConfig& config,
                                      nlohmann::json& out);

absl::StatusOr<ComputeDomainDaemonConfig> DecodeComputeDomainDaemonConfig(
    const nlohmann::json& root);
absl::Status ValidateComputeDomainDaemonConfig(const ComputeDomainDaemonConfig& config);
void EncodeComputeDomainDaemonConfig(const ComputeDomainDaemonConfig& config, nlohmann::json& out);

}  // namespace dra::api::internal
