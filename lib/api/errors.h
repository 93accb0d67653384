#pragma once

// Errors of the opaque configuration API.
//
// Every error that a user's configuration causes (decode, normalize, validate, resolving MPS
// limits against devices, sharing modes the node does not allow) is an InvalidArgument status
// whose message starts with the JSON field path ("sharing.mpsConfig.defaultActiveThreadPercentage:
// expected integer, got string") and which carries the payload kPermanentConfigErrorPayload. The
// kubelet plugin must not retry a claim whose configuration is wrong: the same config always fails
// the same way. Callers test for that with IsPermanentConfigError; dra::Annotate keeps payloads,
// so context added on the way up does not lose the mark.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dra::api {

// Type URL of the payload that marks a permanent configuration error. Its value is unused ("").
inline constexpr absl::string_view kPermanentConfigErrorPayload = "dra.nvidia.com/permanent";

// InvalidArgument "<path>: <message>" (just "<message>" when `path` is empty), marked permanent.
absl::Status ConfigError(absl::string_view path, absl::string_view message);

// Returns `status` with the permanent mark added (OK stays OK).
absl::Status MarkPermanentConfigError(absl::Status status);

// True when `status` carries the permanent mark.
bool IsPermanentConfigError(const absl::Status& status);

}  // namespace dra::api
