// Sharing settings common to GpuConfig and MigDeviceConfig: the strategy, TimeSlicingConfig and
// MpsConfig.

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/api/kinds_internal.h"
#include "lib/api/mps_limits.h"
#include "lib/api/strict_json.h"
#include "lib/common/status.h"

namespace dra::api::internal {
namespace {

constexpr absl::string_view kSupportedStrategies =
    "supported GPU sharing strategies: TimeSlicing, MPS";

}  // namespace

absl::StatusOr<SharingStrategy> DecodeStrategy(const StrictObject& sharing) {
  std::optional<std::string> name;
  RETURN_IF_ERROR(sharing.GetString("strategy", &name));
  const std::string path = sharing.PathOf("strategy");
  if (!name.has_value() || name->empty()) {
    return ConfigError(path, absl::StrCat("required field is missing, ", kSupportedStrategies));
  }
  std::optional<SharingStrategy> strategy = ParseSharingStrategy(*name);
  if (!strategy.has_value()) {
    return ConfigError(
        path, absl::StrCat("unknown GPU sharing strategy: ", *name, ", ", kSupportedStrategies));
  }
  return *strategy;
}

absl::StatusOr<std::optional<TimeSlicingConfig>> DecodeTimeSlicingConfig(
    const StrictObject& sharing) {
  const nlohmann::json* j = sharing.Get("timeSlicingConfig");
  if (j == nullptr) return std::optional<TimeSlicingConfig>();
  ASSIGN_OR_RETURN(StrictObject obj,
                   StrictObject::Open(*j, sharing.PathOf("timeSlicingConfig"), {"interval"}));
  TimeSlicingConfig config;
  std::optional<std::string> name;
  RETURN_IF_ERROR(obj.GetString("interval", &name));
  if (name.has_value()) {
    config.interval = ParseTimeSliceInterval(*name);
    if (!config.interval.has_value()) {
      return ConfigError(obj.PathOf("interval"),
                         absl::StrCat("unknown time-slice interval: ", *name,
                                      ", supported time-slice intervals: Default, Short, Medium, "
                                      "Long"));
    }
  }
  return std::optional<TimeSlicingConfig>(config);
}

void NormalizeTimeSlicingConfig(std::optional<TimeSlicingConfig>& config) {
  if (config.has_value() && !config->interval.has_value()) {
    config->interval = TimeSliceInterval::kDefault;
  }
}

absl::Status ValidateNoTimeSlicingConfigWithMps(const std::optional<TimeSlicingConfig>& config) {
  if (!config.has_value()) return absl::OkStatus();
  return ConfigError("sharing.timeSlicingConfig",
                     "cannot use TimeSlicingConfig with the 'MPS' strategy");
}

nlohmann::json EncodeTimeSlicingConfig(const TimeSlicingConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  if (config.interval.has_value()) {
    out["interval"] = std::string(TimeSliceIntervalName(*config.interval));
  }
  return out;
}

absl::StatusOr<std::optional<MpsConfig>> DecodeMpsConfig(const StrictObject& sharing) {
  const nlohmann::json* j = sharing.Get("mpsConfig");
  if (j == nullptr) return std::optional<MpsConfig>();
  ASSIGN_OR_RETURN(
      StrictObject obj,
      StrictObject::Open(*j, sharing.PathOf("mpsConfig"),
                         {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                          "defaultPerDevicePinnedMemoryLimit", "multiUser"}));
  MpsConfig mps;
  RETURN_IF_ERROR(
      obj.GetInt("defaultActiveThreadPercentage", &mps.default_active_thread_percentage));
  RETURN_IF_ERROR(
      obj.GetQuantity("defaultPinnedDeviceMemoryLimit", &mps.default_pinned_device_memory_limit));
  if (const nlohmann::json* map = obj.Get("defaultPerDevicePinnedMemoryLimit"); map != nullptr) {
    const std::string map_path = obj.PathOf("defaultPerDevicePinnedMemoryLimit");
    if (!map->is_object()) {
      return TypeMismatch(map_path, "object mapping device UUID or index to quantity", *map);
    }
    for (const auto& [key, value] : map->items()) {
      ASSIGN_OR_RETURN(k8s::Quantity q, DecodeQuantity(value, EntryPath(map_path, key)));
      mps.default_per_device_pinned_memory_limit.emplace(key, q);
    }
  }
  RETURN_IF_ERROR(obj.GetBool("multiUser", &mps.multi_user));
  return std::optional<MpsConfig>(std::move(mps));
}

absl::Status ValidateStrategyGate(SharingStrategy strategy, absl::string_view path,
                                  const FeatureGates& gates) {
  absl::string_view gate_name =
      strategy == SharingStrategy::kTimeSlicing ? gate::kTimeSlicingSettings : gate::kMPSSupport;
  if (gates.Enabled(gate_name)) return absl::OkStatus();
  return ConfigError(path, absl::StrCat("\"", SharingStrategyName(strategy),
                                        "\" is selected as the GPU sharing strategy, but the \"",
                                        gate_name, "\" feature gate is not enabled"));
}

absl::Status ValidateMpsConfig(const MpsConfig& mps, absl::string_view path) {
  if (mps.default_active_thread_percentage.has_value()) {
    const std::string p = MemberPath(path, "defaultActiveThreadPercentage");
    if (*mps.default_active_thread_percentage < 0) {
      return ConfigError(p, "active thread percentage must not be negative");
    }
    if (*mps.default_active_thread_percentage > 100) {
      return ConfigError(p, "active thread percentage must not be greater than 100");
    }
  }
  // Limits below 1Mi fail whatever the devices are; Go finds out only at prepare time. Keys can
  // be checked only against the devices (ResolvePinnedMemoryLimits).
  if (mps.default_pinned_device_memory_limit.has_value() &&
      QuantityToMiB(*mps.default_pinned_device_memory_limit) <= 0) {
    return ConfigError(MemberPath(path, "defaultPinnedDeviceMemoryLimit"),
                       absl::StrCat("invalid limit: default value set too low: ",
                                    mps.default_pinned_device_memory_limit->ToString()));
  }
  const std::string map_path = MemberPath(path, "defaultPerDevicePinnedMemoryLimit");
  for (const auto& [key, q] : mps.default_per_device_pinned_memory_limit) {
    if (QuantityToMiB(q) <= 0) {
      return ConfigError(
          EntryPath(map_path, key),
          absl::StrCat("invalid limit: value set too low: ", key, ": ", q.ToString()));
    }
  }
  return absl::OkStatus();
}

nlohmann::json EncodeMpsConfig(const MpsConfig& mps) {
  nlohmann::json out = nlohmann::json::object();
  if (mps.default_active_thread_percentage.has_value()) {
    out["defaultActiveThreadPercentage"] = *mps.default_active_thread_percentage;
  }
  if (mps.default_pinned_device_memory_limit.has_value()) {
    out["defaultPinnedDeviceMemoryLimit"] = mps.default_pinned_device_memory_limit->ToString();
  }
  if (!mps.default_per_device_pinned_memory_limit.empty()) {
    nlohmann::json map = nlohmann::json::object();
    for (const auto& [key, q] : mps.default_per_device_pinned_memory_limit) map[key] = q.ToString();
    out["defaultPerDevicePinnedMemoryLimit"] = std::move(map);
  }
  if (mps.multi_user.has_value()) out["multiUser"] = *mps.multi_user;
  return out;
}

}  // namespace dra::api::internal
