#pragma once

// The feature gates of the driver (docs/compatibility.md "Feature gates"), for every binary: the Go
// driver registers the same set in all of them, and FEATURE_GATES values name gates of both
// drivers.
//
//   dra::FeatureGates gates;
//   RETURN_IF_ERROR(dra::api::RegisterDriverFeatureGates(gates));
//   flags.AddFeatureGatesFlag(&gates);  // Set() then checks the rules below
//
// Rules (messages from lib/common/feature_gates.h, which match the Go driver's):
//   ComputeDomainCliques requires IMEXDaemonsWithDNSNames
//   DeviceMetadata requires PassthroughSupport
//   DynamicMIG excludes PassthroughSupport, NVMLDeviceHealthCheck, MPSSupport
//   PassthroughSupport excludes NVMLDeviceHealthCheck
// The docs also call MPSSupport and NVMLDeviceHealthCheck exclusive; the Go code does not enforce
// it and neither do we. The webhook reads gates without these checks
// (FeatureGates::SetWithoutConstraintChecks), as the Go webhook does.

#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/common/feature_gates.h"

namespace dra::api {

// Gate names, for Enabled() calls.
namespace gate {
inline constexpr absl::string_view kTimeSlicingSettings = "TimeSlicingSettings";
inline constexpr absl::string_view kMPSSupport = "MPSSupport";
inline constexpr absl::string_view kIMEXDaemonsWithDNSNames = "IMEXDaemonsWithDNSNames";
inline constexpr absl::string_view kPassthroughSupport = "PassthroughSupport";
inline constexpr absl::string_view kDynamicMIG = "DynamicMIG";
inline constexpr absl::string_view kNVMLDeviceHealthCheck = "NVMLDeviceHealthCheck";
inline constexpr absl::string_view kComputeDomainCliques = "ComputeDomainCliques";
inline constexpr absl::string_view kCrashOnNVLinkFabricErrors = "CrashOnNVLinkFabricErrors";
inline constexpr absl::string_view kDeviceMetadata = "DeviceMetadata";
inline constexpr absl::string_view kDRAListTypeAttributes = "DRAListTypeAttributes";
inline constexpr absl::string_view kFabricManagerPartitioning = "FabricManagerPartitioning";
inline constexpr absl::string_view kHostManagedIMEXDaemon = "HostManagedIMEXDaemon";
inline constexpr absl::string_view kConsumableShares = "ConsumableShares";
// Logging gates the Go driver's registry also accepts (component-base logs API).
inline constexpr absl::string_view kContextualLogging = "ContextualLogging";
inline constexpr absl::string_view kLoggingAlphaOptions = "LoggingAlphaOptions";
inline constexpr absl::string_view kLoggingBetaOptions = "LoggingBetaOptions";
}  // namespace gate

struct DriverGate {
  absl::string_view name;
  FeatureStage stage;
  bool default_value;
  // Driver release that introduced it ("0.2"); empty for the logging gates.
  absl::string_view since;
  absl::string_view description;
};

// Every gate RegisterDriverFeatureGates registers, in the order of the table in
// docs/compatibility.md "Feature gates", then the logging gates.
std::span<const DriverGate> DriverGates();

// Registers DriverGates() and the dependency and exclusion rules above into `gates`. Fails
// (AlreadyExists) when a gate is already registered.
absl::Status RegisterDriverFeatureGates(FeatureGates& gates);

}  // namespace dra::api
