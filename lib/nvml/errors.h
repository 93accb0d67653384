#pragma once

// How NVML failures surface from the facade. Every failed NVML call becomes an absl::Status whose
// message names the function and carries NVML's own error text (lower-cased, as for errno texts):
//
//   "nvmlDeviceGetMemoryInfo: not supported"
//
// and whose payload keeps the exact NVML return code, so that callers can act on the codes that
// matter (NOT_SUPPORTED, NOT_FOUND, IN_USE, INSUFFICIENT_RESOURCES, GPU_IS_LOST, ...) without
// parsing text. The absl code is the closest match (see ToStatusCode).

#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace dra::nvml {

// NVML return codes (nvmlReturn_t), same values.
enum class ReturnCode : int {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNoPermission = 4,
  kAlreadyInitialized = 5,
  kNotFound = 6,
  kInsufficientSize = 7,
  kInsufficientPower = 8,
  kDriverNotLoaded = 9,
  kTimeout = 10,
  kIrqIssue = 11,
  kLibraryNotFound = 12,
  kFunctionNotFound = 13,
  kCorruptedInforom = 14,
  kGpuIsLost = 15,
  kResetRequired = 16,
  kOperatingSystem = 17,
  kLibRmVersionMismatch = 18,
  kInUse = 19,
  kMemory = 20,
  kNoData = 21,
  kVgpuEccNotSupported = 22,
  kInsufficientResources = 23,
  kFreqNotSupported = 24,
  kArgumentVersionMismatch = 25,
  kUnknown = 999,
};

// The absl code a return code maps to: NOT_FOUND -> kNotFound, NOT_SUPPORTED and
// FUNCTION_NOT_FOUND -> kUnimplemented, INVALID_ARGUMENT -> kInvalidArgument, NO_PERMISSION ->
// kPermissionDenied, INSUFFICIENT_RESOURCES and MEMORY -> kResourceExhausted, TIMEOUT ->
// kDeadlineExceeded, IN_USE, DRIVER_NOT_LOADED and GPU_IS_LOST -> kUnavailable,
// UNINITIALIZED, RESET_REQUIRED and ARGUMENT_VERSION_MISMATCH -> kFailedPrecondition,
// others -> kInternal.
absl::StatusCode ToStatusCode(ReturnCode code);

// A status for a failed call: "<function>: <text>", the mapped code and the return code payload.
// `text` is the library's nvmlErrorString; it is lower-cased and loses a trailing period.
absl::Status MakeNvmlError(ReturnCode code, std::string_view function, std::string_view text);

// `status` with `code` attached as its NVML return code payload (for errors the facade makes up
// itself, such as a missing entry point).
absl::Status WithReturnCode(absl::Status status, ReturnCode code);

// The NVML return code carried by `status`, if it came from an NVML call (annotations keep it).
std::optional<ReturnCode> NvmlReturnCode(const absl::Status& status);

// True when `status` carries `code`.
bool IsNvmlError(const absl::Status& status, ReturnCode code);

// True for "this GPU or this driver cannot do it": NOT_SUPPORTED, or FUNCTION_NOT_FOUND (the
// loaded libnvidia-ml.so.1 lacks the entry point).
bool IsNotSupported(const absl::Status& status);

}  // namespace dra::nvml
