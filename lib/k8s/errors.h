#pragma once

// Kubernetes API errors as absl::Status. The HTTP code picks the absl code and the server's
// `Status.reason` travels as a payload, so callers test reasons, not message text:
//
//   404 NotFound -> kNotFound          409 AlreadyExists -> kAlreadyExists
//   409 Conflict -> kAborted           410 Gone/Expired  -> kOutOfRange
//   403 Forbidden -> kPermissionDenied 401 Unauthorized  -> kUnauthenticated
//   422 Invalid -> kInvalidArgument    429 TooManyRequests -> kResourceExhausted
//   500/503 -> kUnavailable            504 Timeout       -> kDeadlineExceeded

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dra::k8s {

inline constexpr absl::string_view kReasonPayload = "k8s.io/reason";
inline constexpr absl::string_view kRetryAfterPayload = "k8s.io/retry-after-seconds";

// Builds the status for a non-2xx answer: `<what>: <server message>`, reason from the body's
// Status object, or derived from the code when the body is not a Status.
absl::Status StatusFromHttp(long code, absl::string_view body, absl::string_view retry_after,
                            absl::string_view what);

// The Kubernetes reason ("NotFound", "Conflict", ...), or "" if none.
std::string Reason(const absl::Status& status);
// Seconds from Retry-After or details.retryAfterSeconds; zero when absent.
absl::Duration RetryAfter(const absl::Status& status);

// NotFound and AlreadyExists map one-to-one onto absl codes: use absl::IsNotFound and
// absl::IsAlreadyExists (same names here would be ambiguous through argument-dependent lookup).
bool IsConflict(const absl::Status& s);
bool IsGone(const absl::Status& s);  // 410: resourceVersion too old, relist
bool IsForbidden(const absl::Status& s);
bool IsUnauthorized(const absl::Status& s);
bool IsInvalid(const absl::Status& s);
bool IsTooManyRequests(const absl::Status& s);

}  // namespace dra::k8s
