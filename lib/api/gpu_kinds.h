#pragma once

// Which config kinds given to driver gpu.nvidia.com can take effect in this version. The webhook
// asks this so that it does not admit a config that every prepare would refuse (or never apply):
// a kind the GPU plugin does not apply to any device it publishes.
//
// Thread-safety: a free function over a value; safe to call concurrently.

#include "absl/status/status.h"
#include "lib/api/types.h"

namespace dra::api {

// OK for GpuConfig, MigDeviceConfig and VfioDeviceConfig. Otherwise (ComputeDomainChannelConfig,
// ComputeDomainDaemonConfig: they configure devices of compute-domain.nvidia.com, and prepare
// refuses them with "kind X does not configure devices of driver gpu.nvidia.com") a permanent
// config error (errors.h) at path "kind" that says why and which kinds are allowed.
absl::Status CheckGpuConfigKind(const Config& config);

}  // namespace dra::api
