#pragma once

// The feature gates of the driver (docs/compatibility.md "Feature gates"), for every binary: the Go
// driver registers the same set in all of them, and FEATURE_GATES values name gates of both
// drivers.
//
//   dra::FeatureGates gates;
//   RETURN_IF_ERROR(dra::api::RegisterDriverFeatureGates(gates, "gpu-kubelet-plugin"));
//   flags.AddFeatureGatesFlag(&gates);  // Set() then checks availability and the rules below
//
// Availability: the table in driver_gates.cc says which gates this version implements. A gate
// that is not implemented keeps its default, and setting it to anything else fails at startup:
//   "LoggingAlphaOptions=true: not available in this version of gpu-kubelet-plugin (there are no
//    alpha logging options here); allowed gates: ConsumableShares, ..."
// so that no gate is accepted without effect (AllAlpha and AllBeta skip such gates).
//
// Rules (messages from lib/common/feature_gates.h, which match the Go driver's):
//   ComputeDomainCliques requires IMEXDaemonsWithDNSNames
//   DeviceMetadata requires PassthroughSupport
// The Go driver also makes DynamicMIG exclude PassthroughSupport, NVMLDeviceHealthCheck and
// MPSSupport, and PassthroughSupport exclude NVMLDeviceHealthCheck; here every pair works together
// (docs/compatibility.md "Beyond the public driver"), so those rules are gone. The Go docs also
// call MPSSupport and NVMLDeviceHealthCheck exclusive; neither driver enforces it. The webhook
// reads gates without these checks
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
  // Empty when this version implements the gate's capability; else why it is not available
  // ("there are no alpha logging options here").
  absl::string_view missing;
};

// Every gate RegisterDriverFeatureGates registers, in the order of the table in
// docs/compatibility.md "Feature gates", then the logging gates.
std::span<const DriverGate> DriverGates();

// Whether this version implements the capability of gate `name` (false for unknown names).
bool DriverGateImplemented(absl::string_view name);

// Registers DriverGates() and the dependency and exclusion rules above into `gates`; `binary`
// names the program in the message for a gate that is not available. Fails (AlreadyExists) when
// a gate is already registered.
absl::Status RegisterDriverFeatureGates(FeatureGates& gates,
                                        absl::string_view binary = "the driver");

// Only the dependency and exclusion rules above; every gate they name must be registered.
// RegisterDriverFeatureGates calls it.
absl::Status AddDriverGateRules(FeatureGates& gates);

}  // namespace dra::api
