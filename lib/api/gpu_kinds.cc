#include "lib/api/gpu_kinds.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"

namespace dra::api {
namespace {

constexpr absl::string_view kPath = "kind";

// The kinds the GPU plugin applies in this version, for the error messages.
std::string AllowedKinds(bool vfio) {
  return absl::StrCat("allowed kinds for driver gpu.nvidia.com: ", kGpuConfigKind, ", ",
                      kMigDeviceConfigKind, vfio ? absl::StrCat(", ", kVfioDeviceConfigKind) : "");
}

}  // namespace

absl::Status CheckGpuConfigKind(const Config& config) {
  const bool vfio = DriverGateImplemented(gate::kPassthroughSupport);
  if (!IsGpuDeviceConfig(config)) {
    return ConfigError(kPath, absl::StrCat(KindName(config),
                                           " does not configure devices of driver gpu.nvidia.com (",
                                           AllowedKinds(vfio), ")"));
  }
  if (std::holds_alternative<VfioDeviceConfig>(config) && !vfio) {
    return ConfigError(kPath, absl::StrCat(kVfioDeviceConfigKind,
                                           ": VFIO passthrough is not supported by this version (",
                                           AllowedKinds(vfio), ")"));
  }
  return absl::OkStatus();
}

}  // namespace dra::api
