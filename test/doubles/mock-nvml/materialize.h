#pragma once

// Keeps the driver's kernel-side files in a mock driver root in step with the mock state, as the
// real kernel module would:
//   <root>/proc/devices                                      character device majors
//   <root>/proc/driver/nvidia/version
//   <root>/proc/driver/nvidia/gpus/<pci>/information
//   <root>/proc/driver/nvidia/capabilities/mig/{config,monitor}
//   <root>/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<id>/access       (existing GIs)
//   <root>/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<id>/ci<id>/access (existing CIs)
//   <root>/proc/driver/nvidia-caps/mig-minors
//   <root>/dev/nvidia-caps/nvidia-cap<minor>   created for instances when they are created (as
//                                              nvidia-modprobe would), character devices when
//                                              running as root, else empty regular files; never
//                                              removed, and not recreated once deleted (tests
//                                              delete them to hide a MIG device)
// Never called for root "/" (inside a container): the mock must not touch a real /proc or /dev.

#include <string>

#include "test/doubles/mock-nvml/spec.h"
#include "test/doubles/mock-nvml/state.h"

namespace mock_nvml {

// Brings the files in line with `state`. Capability device nodes are made for the instances in
// `state` that are not in `before` (all of them when `before` is null: a new driver root).
// Best effort: failures are reported in `error` (the first one) but do not stop the rest.
void MaterializeDriverFiles(const std::string& root, const NodeSpec& spec, const State* before,
                            const State& state, std::string* error);

}  // namespace mock_nvml
