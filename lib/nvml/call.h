#pragma once

// Internal to lib/nvml: calling an entry point through the Library with uniform error handling,
// and the conversions between the facade's opaque void* handles and the ABI handle types.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/nvml/library.h"
#include "lib/nvml/nvml_abi.h"
#include "lib/nvml/types.h"

namespace dra::nvml::internal {

// Calls `fn(args...)` and turns its return code into a Status naming `function`; a null `fn` (an
// optional entry point the library lacks) gives Library::Missing.
template <typename Fn, typename... Args>
absl::Status Call(const Library& library, Fn* fn, std::string_view function, Args... args) {
  if (fn == nullptr) return library.Missing(function);
  return library.Check(fn(args...), function);
}

inline abi::DeviceHandle AsDevice(void* h) { return static_cast<abi::DeviceHandle>(h); }
inline abi::GpuInstanceHandle AsGpuInstance(void* h) {
  return static_cast<abi::GpuInstanceHandle>(h);
}
inline abi::ComputeInstanceHandle AsComputeInstance(void* h) {
  return static_cast<abi::ComputeInstanceHandle>(h);
}

// A name or UUID of a full GPU or MIG device handle (device.cc).
absl::StatusOr<std::string> GetDeviceString(const Library& library, abi::DeviceGetStringFn* fn,
                                            std::string_view function, void* handle);
// Memory of a full GPU or MIG device handle, via nvmlDeviceGetMemoryInfo_v2 when the library has
// it (device.cc).
absl::StatusOr<MemoryInfo> GetDeviceMemory(const Library& library, void* handle);

}  // namespace dra::nvml::internal
