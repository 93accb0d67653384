#pragma once

// Plain types PluginServer users exchange with it besides the DraDriver interface (driver.h):
// the kubelet's registration answer and device health for the optional health stream. Kept free
// of gRPC so that including plugin_server.h does not pull in generated code.

#include <string>

#include "absl/time/time.h"

namespace dra::kubeletplugin {

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
