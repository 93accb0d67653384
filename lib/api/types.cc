#include "lib/api/types.h"

#include <type_traits>

namespace dra::api {

absl::string_view SharingStrategyName(SharingStrategy strategy) {
  switch (strategy) {
    case SharingStrategy::kTimeSlicing:
      return "TimeSlicing";
    case SharingStrategy::kMps:
      return "MPS";
  }
  return "";
}

std::optional<SharingStrategy> ParseSharingStrategy(absl::string_view name) {
  // Exact, case-sensitive match, like the Go string constants.
  for (SharingStrategy s : {SharingStrategy::kTimeSlicing, SharingStrategy::kMps}) {
    if (name == SharingStrategyName(s)) return s;
  }
  return std::nullopt;
}

absl::string_view TimeSliceIntervalName(TimeSliceInterval interval) {
  switch (interval) {
    case TimeSliceInterval::kDefault:
      return "Default";
    case TimeSliceInterval::kShort:
      return "Short";
    case TimeSliceInterval::kMedium:
      return "Medium";
    case TimeSliceInterval::kLong:
      return "Long";
  }
  return "";
}

std::optional<TimeSliceInterval> ParseTimeSliceInterval(absl::string_view name) {
  for (TimeSliceInterval i : {TimeSliceInterval::kDefault, TimeSliceInterval::kShort,
                              TimeSliceInterval::kMedium, TimeSliceInterval::kLong}) {
    if (name == TimeSliceIntervalName(i)) return i;
  }
  return std::nullopt;
}

absl::string_view IommuBackendPolicyName(IommuBackendPolicy policy) {
  switch (policy) {
    case IommuBackendPolicy::kLegacyOnly:
      return "LegacyOnly";
    case IommuBackendPolicy::kPreferIommuFd:
      return "PreferIommuFD";
  }
  return "";
}

std::optional<IommuBackendPolicy> ParseIommuBackendPolicy(absl::string_view name) {
  for (IommuBackendPolicy p :
       {IommuBackendPolicy::kLegacyOnly, IommuBackendPolicy::kPreferIommuFd}) {
    if (name == IommuBackendPolicyName(p)) return p;
  }
  return std::nullopt;
}

absl::string_view KindName(const Config& config) {
  return std::visit(
      [](const auto& c) -> absl::string_view {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, GpuConfig>) return kGpuConfigKind;
        if constexpr (std::is_same_v<T, MigDeviceConfig>) return kMigDeviceConfigKind;
        if constexpr (std::is_same_v<T, VfioDeviceConfig>) return kVfioDeviceConfigKind;
        if constexpr (std::is_same_v<T, ComputeDomainChannelConfig>) {
          return kComputeDomainChannelConfigKind;
        }
        if constexpr (std::is_same_v<T, ComputeDomainDaemonConfig>) {
          return kComputeDomainDaemonConfigKind;
        }
      },
      config);
}

bool IsGpuDeviceConfig(const Config& config) {
  return std::holds_alternative<GpuConfig>(config) ||
         std::holds_alternative<MigDeviceConfig>(config) ||
         std::holds_alternative<VfioDeviceConfig>(config);
}

bool UsesMps(const Config& config) {
  if (const auto* gpu = std::get_if<GpuConfig>(&config); gpu != nullptr) {
    return gpu->sharing.has_value() && gpu->sharing->strategy == SharingStrategy::kMps;
  }
  if (const auto* mig = std::get_if<MigDeviceConfig>(&config); mig != nullptr) {
    return mig->sharing.has_value() && mig->sharing->strategy == SharingStrategy::kMps;
  }
  return false;
}

GpuConfig DefaultGpuConfig() { return GpuConfig{}; }

MigDeviceConfig DefaultMigDeviceConfig() { return MigDeviceConfig{}; }

std::optional<VfioDeviceConfig> DefaultVfioDeviceConfig(bool passthrough_support_enabled) {
  if (!passthrough_support_enabled) return std::nullopt;
  return VfioDeviceConfig{.iommu = IommuConfig{.backend_policy = IommuBackendPolicy::kLegacyOnly,
                                               .enable_api_device = false}};
}

}  // namespace dra::api
