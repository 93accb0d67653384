#include "lib/nvml/errors.h"

#include <cctype>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dra::nvml {
namespace {

// Payload type URL under which the NVML return code travels (decimal text).
constexpr char kReturnCodeUrl[] = "type.googleapis.com/dra.nvml.ReturnCode";

}  // namespace

absl::StatusCode ToStatusCode(ReturnCode code) {
  switch (code) {
    case ReturnCode::kSuccess:
      return absl::StatusCode::kOk;
    case ReturnCode::kNotFound:
      return absl::StatusCode::kNotFound;
    case ReturnCode::kNotSupported:
    case ReturnCode::kFunctionNotFound:
      return absl::StatusCode::kUnimplemented;
    case ReturnCode::kInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case ReturnCode::kNoPermission:
      return absl::StatusCode::kPermissionDenied;
    case ReturnCode::kInsufficientResources:
    case ReturnCode::kMemory:
      return absl::StatusCode::kResourceExhausted;
    case ReturnCode::kTimeout:
      return absl::StatusCode::kDeadlineExceeded;
    case ReturnCode::kInUse:
    case ReturnCode::kDriverNotLoaded:
    case ReturnCode::kGpuIsLost:
      return absl::StatusCode::kUnavailable;
    case ReturnCode::kUninitialized:
    case ReturnCode::kResetRequired:
    case ReturnCode::kArgumentVersionMismatch:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status MakeNvmlError(ReturnCode code, std::string_view function, std::string_view text) {
  std::string message(text);
  while (!message.empty() && (message.back() == '.' || message.back() == ' ')) message.pop_back();
  for (char& c : message) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (message.empty()) message = absl::StrCat("nvml error ", static_cast<int>(code));
  absl::StatusCode status_code = ToStatusCode(code);
  if (status_code == absl::StatusCode::kOk) status_code = absl::StatusCode::kInternal;
  absl::Status status(status_code, absl::StrCat(absl::string_view(function.data(), function.size()),
                                                ": ", message));
  return WithReturnCode(std::move(status), code);
}

absl::Status WithReturnCode(absl::Status status, ReturnCode code) {
  if (!status.ok()) {
    status.SetPayload(kReturnCodeUrl, absl::Cord(absl::StrCat(static_cast<int>(code))));
  }
  return status;
}

std::optional<ReturnCode> NvmlReturnCode(const absl::Status& status) {
  auto payload = status.GetPayload(kReturnCodeUrl);  // absl::optional, not std::optional
  int value = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &value)) return std::nullopt;
  return static_cast<ReturnCode>(value);
}

bool IsNvmlError(const absl::Status& status, ReturnCode code) {
  return NvmlReturnCode(status) == code;
}

bool IsNotSupported(const absl::Status& status) {
  return IsNvmlError(status, ReturnCode::kNotSupported) ||
         IsNvmlError(status, ReturnCode::kFunctionNotFound);
}

}  // namespace dra::nvml
