#pragma once

// The opaque device configuration kinds of API group resource.nvidia.com/v1beta1, as users write
// them in ResourceClaims and DeviceClasses (docs/compatibility.md "Opaque configs"). Field names,
// spellings and defaults are those of the public Go driver, so that its manifests work unchanged.
//
// Mapping: a Go pointer field (or an omitempty map) is a std::optional (or a possibly empty
// std::map); a Go enum-like string is a C++ enum, because decoding (config.h) already rejects
// values outside the enum with the Go driver's validation message.
//
// The structs are plain values: copyable, comparable, no invariants of their own. The functions
// in config.h decode, normalize (fill defaults) and validate them.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "absl/strings/string_view.h"
#include "lib/k8s/quantity.h"

namespace dra::api {

inline constexpr absl::string_view kGroup = "resource.nvidia.com";
inline constexpr absl::string_view kVersion = "v1beta1";
inline constexpr absl::string_view kApiVersion = "resource.nvidia.com/v1beta1";

// Kind names, as in the "kind" field.
inline constexpr absl::string_view kGpuConfigKind = "GpuConfig";
inline constexpr absl::string_view kMigDeviceConfigKind = "MigDeviceConfig";
inline constexpr absl::string_view kVfioDeviceConfigKind = "VfioDeviceConfig";
inline constexpr absl::string_view kComputeDomainChannelConfigKind = "ComputeDomainChannelConfig";
inline constexpr absl::string_view kComputeDomainDaemonConfigKind = "ComputeDomainDaemonConfig";

// ---- sharing (GpuConfig, MigDeviceConfig) ----

enum class SharingStrategy { kTimeSlicing, kMps };
// "TimeSlicing" or "MPS".
absl::string_view SharingStrategyName(SharingStrategy strategy);
std::optional<SharingStrategy> ParseSharingStrategy(absl::string_view name);

// The numeric values are the ones `nvidia-smi compute-policy --set-timeslice` takes.
enum class TimeSliceInterval { kDefault = 0, kShort = 1, kMedium = 2, kLong = 3 };
// "Default", "Short", "Medium" or "Long".
absl::string_view TimeSliceIntervalName(TimeSliceInterval interval);
std::optional<TimeSliceInterval> ParseTimeSliceInterval(absl::string_view name);
// 0..3, the argument of `nvidia-smi compute-policy --set-timeslice`.
inline int TimeSliceIntervalValue(TimeSliceInterval interval) { return static_cast<int>(interval); }

struct TimeSlicingConfig {
  // Absent only before Normalize; Normalize sets kDefault.
  std::optional<TimeSliceInterval> interval;  // json "interval"

  bool operator==(const TimeSlicingConfig&) const = default;
};

struct MpsConfig {
  // 0..100 after Validate.
  std::optional<int64_t> default_active_thread_percentage;  // "defaultActiveThreadPercentage"
  // Applied to every device of the group; at least 1Mi after Validate.
  std::optional<k8s::Quantity>
      default_pinned_device_memory_limit;  // "defaultPinnedDeviceMemoryLimit"
  // Overrides per device; the key is a device UUID of the group or an index into the group's
  // UUIDs in ascending order ("0", "1", ...). Resolved by ResolvePinnedMemoryLimits (mps_limits.h).
  std::map<std::string, k8s::Quantity> default_per_device_pinned_memory_limit;
  // Start the MPS control daemon with -M (needs compute capability >= 7.0, checked at prepare).
  std::optional<bool> multi_user;  // "multiUser"

  bool operator==(const MpsConfig&) const = default;
};

// GpuConfig.sharing.
struct GpuSharing {
  SharingStrategy strategy = SharingStrategy::kTimeSlicing;  // "strategy" (required)
  std::optional<TimeSlicingConfig> time_slicing_config;      // "timeSlicingConfig"
  std::optional<MpsConfig> mps_config;                       // "mpsConfig"

  bool operator==(const GpuSharing&) const = default;
};

// MigDeviceConfig.sharing. A MIG device has no time-slice of its own: the interval of
// timeSlicingConfig is set on its parent GPU (lib/gpuplugin/timeslicing/time_slicing.h). Unlike
// GpuConfig's, timeSlicingConfig stays absent after Normalize when not given (then nothing is set).
struct MigDeviceSharing {
  SharingStrategy strategy = SharingStrategy::kTimeSlicing;  // "strategy" (required)
  std::optional<TimeSlicingConfig> time_slicing_config;      // "timeSlicingConfig"
  std::optional<MpsConfig> mps_config;                       // "mpsConfig"

  bool operator==(const MigDeviceSharing&) const = default;
};

// ---- the kinds ----

// Configures full GPUs (DeviceClass gpu.nvidia.com). No sharing = exclusive use.
struct GpuConfig {
  std::optional<GpuSharing> sharing;

  bool operator==(const GpuConfig&) const = default;
};

// Configures MIG devices (DeviceClass mig.nvidia.com). TimeSlicing without a timeSlicingConfig
// changes nothing; with a non-Default interval it sets that interval on the parent GPU.
struct MigDeviceConfig {
  std::optional<MigDeviceSharing> sharing;

  bool operator==(const MigDeviceConfig&) const = default;
};

enum class IommuBackendPolicy { kLegacyOnly, kPreferIommuFd };
// "LegacyOnly" or "PreferIommuFD".
absl::string_view IommuBackendPolicyName(IommuBackendPolicy policy);
std::optional<IommuBackendPolicy> ParseIommuBackendPolicy(absl::string_view name);

struct IommuConfig {
  // Absent (or "") before Normalize; Normalize sets kLegacyOnly.
  std::optional<IommuBackendPolicy> backend_policy;  // "backendPolicy"
  // Expose /dev/iommu or /dev/vfio/vfio to the workload. Normalize sets false when absent.
  std::optional<bool> enable_api_device;  // "enableAPIDevice"

  bool operator==(const IommuConfig&) const = default;
};

// Configures VFIO passthrough devices (DeviceClass vfio.gpu.nvidia.com).
struct VfioDeviceConfig {
  // Absent before Normalize; Normalize sets {LegacyOnly, false}.
  std::optional<IommuConfig> iommu;

  bool operator==(const VfioDeviceConfig&) const = default;
};

// Written by the compute-domain controller into the channel ResourceClaimTemplate.
struct ComputeDomainChannelConfig {
  std::string domain_id;        // "domainID": UID of the ComputeDomain; non-empty after Validate
  std::string allocation_mode;  // "allocationMode": "Single" (or empty) or "All"

  // Only "All" asks for every channel; anything else means one channel, as in the Go driver.
  bool AllChannels() const { return allocation_mode == "All"; }

  bool operator==(const ComputeDomainChannelConfig&) const = default;
};

// Written by the compute-domain controller into the IMEX daemon ResourceClaimTemplate.
struct ComputeDomainDaemonConfig {
  std::string domain_id;  // "domainID"

  bool operator==(const ComputeDomainDaemonConfig&) const = default;
};

// One decoded opaque configuration.
using Config = std::variant<GpuConfig, MigDeviceConfig, VfioDeviceConfig,
                            ComputeDomainChannelConfig, ComputeDomainDaemonConfig>;

// The "kind" string of the alternative held.
absl::string_view KindName(const Config& config);

// True for the kinds the GPU kubelet plugin applies to devices (GpuConfig, MigDeviceConfig,
// VfioDeviceConfig); the compute-domain kinds belong to the compute-domain driver.
bool IsGpuDeviceConfig(const Config& config);

// True when the config asks for MPS (GpuConfig or MigDeviceConfig with strategy MPS).
bool UsesMps(const Config& config);

// The lowest-precedence configs the plugins start from (docs/compatibility.md "Which config applies
// to which device"): no sharing, and for VFIO the normalized defaults. DefaultVfioDeviceConfig
// exists only with gate PassthroughSupport, which the caller passes in (kept as a bool so this
// header does not need the gate registry).
GpuConfig DefaultGpuConfig();
MigDeviceConfig DefaultMigDeviceConfig();
std::optional<VfioDeviceConfig> DefaultVfioDeviceConfig(bool passthrough_support_enabled);

}  // namespace dra::api
