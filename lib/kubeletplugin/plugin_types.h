#pragma once

// Plain types PluginServer users exchange with it besides the DraDriver interface (driver.h): a
// prepared device as the kubelet gets it, the kubelet's registration answer and device health for
// the optional health stream. Kept free of gRPC (and of the rest of lib/kubeletplugin: its CMake
// target is the header-only dra_kubeletplugin_types), so that including plugin_server.h does not
// pull in generated code and the plugins' checkpoint records can hold a PreparedDevice.

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dra::kubeletplugin {

// One device prepared for a claim, as reported to the kubelet (DraDriver, driver.h). Both plugins'
// checkpoint records of a prepared device hold one, and return it as it is.
struct PreparedDevice {
  // Requests the device was allocated for. "<request>/<subrequest>" entries are allowed and are
  // reduced to the base request before they go to the kubelet. Empty: every request of the claim.
  std::vector<std::string> request_names;
  std::string pool_name;
  std::string device_name;
  // Fully qualified CDI device IDs ("vendor/class=name") that the runtime injects.
  std::vector<std::string> cdi_device_ids;
  // The allocation's share ID for consumable-capacity devices. Only the v1 API carries it; a
  // v1beta1 kubelet never sees it.
  std::optional<std::string> share_id;

  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

// What the kubelet last told us through NotifyRegistrationStatus.
struct RegistrationStatus {
  bool registered = false;
  std::string error;  // the kubelet's reason when !registered
};

enum class HealthStatus { kUnknown, kHealthy, kUnhealthy };

// The health of one device, as streamed to the kubelet (DRAResourceHealth).
struct DeviceHealth {
  std::string pool_name;
  std::string device_name;
  HealthStatus status = HealthStatus::kUnknown;
  absl::Time last_updated = absl::UnixEpoch();  // sent in whole seconds
  // How long the kubelet may trust this entry; zero or less: the kubelet's default.
  absl::Duration check_timeout = absl::ZeroDuration();
  std::string message;  // the kubelet truncates beyond 1024 characters
};

}  // namespace dra::kubeletplugin
