#pragma once

// Which config kinds given to driver gpu.nvidia.com can take effect in this version. The webhook
// asks this so that it does not admit a config that every prepare would refuse (or never apply):
// a kind the GPU plugin does not apply to any device it publishes.
//
// Thread-safety: a free function over a value; safe to call concurrently.

#include "absl/status/status.h"
#include "lib/api/types.h"

namespace dra::api {

// OK for GpuConfig and MigDeviceConfig. Otherwise a permanent config error (errors.h) at path
// "kind" that says why and which kinds are allowed:
// - ComputeDomainChannelConfig, ComputeDomainDaemonConfig: they configure devices of
//   compute-domain.nvidia.com, and prepare refuses them with "kind X does not configure devices
//   of driver gpu.nvidia.com".
// - VfioDeviceConfig while the gate PassthroughSupport is not implemented (driver_gates.cc): no
//   VFIO devices are published, so the config never applies, and prepare refuses it for a VFIO
//   device with "VFIO passthrough is not supported by this version". It becomes OK when the gate
//   table marks PassthroughSupport implemented.
absl::Status CheckGpuConfigKind(const Config& config);

}  // namespace dra::api
