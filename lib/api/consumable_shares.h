#pragma once

// The GPU plugin's --consumable-shares flag (docs/compatibility.md "Flags and environment
// variables" and "ResourceSlices") and the rule it imposes on configs (docs/sharing.md): with
// consumable shares a device may be allocated to several claims, and MPS is not supported then (a
// process can talk to one MPS pipe directory only).
//
// Values: "disabled" (default), "memory", "unlimited", or a positive integer N (N shares per
// device). Anything but "disabled" needs the feature gate ConsumableShares. Messages are the Go
// driver's.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/api/types.h"
#include "lib/common/feature_gates.h"

namespace dra::api {

struct ConsumableShares {
  enum class Mode {
    kDisabled,   // one claim per device
    kMemory,     // memory capacity, request default = all memory
    kUnlimited,  // memory capacity, request default = 0
    kShares,     // memory as kUnlimited plus a "shares" capacity of `shares`
  };
  Mode mode = Mode::kDisabled;
  int64_t shares = 0;  // > 0 for kShares, else 0

  bool Enabled() const { return mode != Mode::kDisabled; }
  // The flag value that parses back to this: "disabled", "memory", "unlimited" or "<N>".
  std::string ToString() const;

  bool operator==(const ConsumableShares&) const = default;
};

// Parses the flag value and checks the gate, in the Go driver's order:
//   anything but "disabled" with the gate off ->
//     "--consumable-shares requires feature gate ConsumableShares to be enabled"
//   not disabled/memory/unlimited and not an integer > 0 ->
//     "invalid value for --consumable-shares: \"x\" (must be 'disabled', 'memory', 'unlimited',
//      or a positive integer)"
// Errors are InvalidArgument (startup misconfiguration, not config errors).
absl::StatusOr<ConsumableShares> ParseConsumableShares(absl::string_view value,
                                                       const FeatureGates& gates);

// The prepare-time rule for a config under `shares`: MPS (GpuConfig or MigDeviceConfig) is
// rejected with "sharing.strategy: MPS sharing is not supported when consumable shares is
// enabled", a permanent config error. Everything else is OK.
absl::Status CheckConsumableSharesAllowSharing(const Config& config,
                                               const ConsumableShares& shares);

}  // namespace dra::api
