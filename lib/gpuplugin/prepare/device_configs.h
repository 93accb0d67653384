#pragma once

// Which opaque configuration applies to which allocated device of a claim (docs/compatibility.md
// "Which config applies to which device"): driver defaults first, then the class configs, then the
// claim configs, in allocation order; for each result the last config naming its request wins, else
// the last request-less config of the device's type. Results are grouped by the config they got.
//
// Every error here comes from the claim or its classes and cannot heal by retrying: they are
// marked permanent (api::IsPermanentConfigError).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/api/types.h"
#include "lib/common/feature_gates.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/k8s/objects_resource.h"

namespace dra::gpu {

struct ConfigGroup {
  api::Config config;  // normalized and validated
  std::vector<const k8s::DeviceRequestAllocationResult*> results;
  std::vector<const AllocatableDevice*> devices;  // parallel to results
};

// REQUIRES: claim.status.allocation is set. Results of other drivers are ignored. The returned
// pointers point into `claim` and `inventory`.
absl::StatusOr<std::vector<ConfigGroup>> ResolveDeviceConfigs(const k8s::ResourceClaim& claim,
                                                              const Inventory& inventory,
                                                              const std::string& driver_name,
                                                              const FeatureGates& gates);

}  // namespace dra::gpu
