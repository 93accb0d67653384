#pragma once

// Which ComputeDomain config applies to each device allocated to a claim by this driver
// (compute-domain.nvidia.com), from the claim's status.allocation.devices:
//
//   1. every config entry whose opaque driver is ours is decoded: strictly at prepare (an
//      unknown field, a wrong type, an unknown kind is a permanent error naming the field:
//      `strict decoding error: unknown field "unexpectedField" (allowed fields: ...)`), leniently
//      at unprepare (unknown fields dropped). An entry without `opaque` is a permanent error;
//   2. precedence, lowest first: the defaults (a ComputeDomainChannelConfig and a
//      ComputeDomainDaemonConfig with empty domainID), the FromClass entries, the FromClaim
//      entries;
//   3. per allocation result of our driver: the highest-precedence entry naming its request (the
//      full "req/sub" name or its base request), else the highest-precedence entry naming no
//      request whose kind fits the device. An entry naming the request with a kind that does not
//      fit the device is a permanent error;
//   4. the device must be "channel-<n>" or "daemon-<n>" (what this driver publishes);
//   5. the chosen config is validated (an empty domainID is a permanent error).

#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/api/types.h"
#include "lib/k8s/objects_resource.h"

namespace dra::cdplugin {

inline constexpr char kDriverName[] = "compute-domain.nvidia.com";

enum class DeviceType { kChannel, kDaemon };

struct ConfiguredDevice {
  k8s::DeviceRequestAllocationResult result;
  DeviceType type = DeviceType::kChannel;
  int id = 0;  // the <n> of channel-<n> / daemon-<n>
  std::variant<api::ComputeDomainChannelConfig, api::ComputeDomainDaemonConfig> config;

  const std::string& domain_id() const;
};

// "channel" / "daemon".
const char* DeviceTypeName(DeviceType type);

// Steps 1-5 over `allocation`. Results of other drivers are skipped. `strict`: prepare's decoding.
absl::StatusOr<std::vector<ConfiguredDevice>> ConfigureDevices(
    const k8s::AllocationResult& allocation, bool strict);

}  // namespace dra::cdplugin
