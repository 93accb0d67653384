#include "lib/api/gpu_kinds.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"

namespace dra::api {
namespace {

constexpr absl::string_view kPath = "kind";

// The kinds the GPU plugin applies in this version, for the error messages.
std::string AllowedKinds() {
  return absl::StrCat("allowed kinds for driver gpu.nvidia.com: ", kGpuConfigKind, ", ",
                      kMigDeviceConfigKind, ", ", kVfioDeviceConfigKind);
}

}  // namespace

absl::Status CheckGpuConfigKind(const Config& config) {
  if (!IsGpuDeviceConfig(config)) {
    return ConfigError(kPath, absl::StrCat(KindName(config),
                                           " does not configure devices of driver gpu.nvidia.com (",
                                           AllowedKinds(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace dra::api
