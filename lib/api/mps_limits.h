#pragma once

// MPS pinned device memory limits: from MpsConfig's default and per-device quantities to the MiB
// values `nvidia-cuda-mps-control` takes ("set_default_device_pinned_mem_limit <uuid> <N>M").
//
// Rules of the Go driver's MpsPerDevicePinnedMemoryLimit.Normalize (docs/compatibility.md
// "Opaque configs"):
// - a quantity becomes MiB as Value() (whole bytes, rounded up) / 1024 / 1024, truncated; a result
//   below 1 is an error ("invalid limit: value set too low: <key>: <q>", for the default
//   "invalid limit: default value set too low: <q>");
// - the default applies to every device of the group, then per-device entries override it;
// - a per-device key is a UUID of the group, else a decimal integer (as Go's strconv.Atoi: an
//   optional sign, digits) indexing the group's UUIDs in ascending order; otherwise
//   "invalid device: unable to parse key as an integer: <key>" or
//   "invalid device: invalid device index: <i>".
// Difference from Go: two keys naming the same device (its UUID and its index) with different
// limits are an error here; Go picks one at random (map iteration order).
//
// Errors are permanent config errors whose message starts with the field path under
// `mps_path` (the path of the mpsConfig object, "sharing.mpsConfig" for both GpuConfig and
// MigDeviceConfig).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/api/types.h"
#include "lib/k8s/quantity.h"

namespace dra::api {

inline constexpr absl::string_view kMpsConfigPath = "sharing.mpsConfig";

// Whole MiB in `q` as the Go driver computes them (may be zero or negative).
int64_t QuantityToMiB(const k8s::Quantity& q);

// "<mib>M", the unit suffix MPS control commands and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT take.
std::string FormatMiB(int64_t mib);

// The effective limit in MiB per device UUID of the group. `group_uuids` are the UUIDs of the
// devices (full GPUs and MIG devices) the config applies to, in any order; index keys refer to
// their ascending order. Devices without a limit are absent from the result; with no devices the
// default is not checked (as in Go).
absl::StatusOr<std::map<std::string, int64_t>> ResolvePinnedMemoryLimits(
    const MpsConfig& mps, std::vector<std::string> group_uuids,
    absl::string_view mps_path = kMpsConfigPath);

}  // namespace dra::api
