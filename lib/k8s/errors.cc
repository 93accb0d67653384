#include "lib/k8s/errors.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/common/json_access.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {
namespace {

absl::StatusCode CodeFor(long http, absl::string_view reason) {
  if (reason == "AlreadyExists") return absl::StatusCode::kAlreadyExists;
  if (reason == "Conflict") return absl::StatusCode::kAborted;
  switch (http) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
    case 406:
    case 415:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return http >= 500 ? absl::StatusCode::kUnavailable : absl::StatusCode::kUnknown;
  }
}

absl::string_view DefaultReason(long http) {
  switch (http) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "Unknown";
  }
}

}  // namespace

absl::Status StatusFromHttp(long code, absl::string_view body, absl::string_view retry_after,
                            absl::string_view what) {
  std::string reason(DefaultReason(code));
  std::string message;
  int64_t retry_seconds = 0;
  // The body is whatever the server (or a proxy in front of it) sent: read leniently, never
  // throwing; a field of another type reads as absent.
  const nlohmann::json j = json_access::Parse(body).value_or(nlohmann::json());
  if (j.is_object() && json_access::StringOr(j, "kind") == "Status") {
    if (std::string r = json_access::StringOr(j, "reason"); !r.empty()) reason = std::move(r);
    message = json_access::StringOr(j, "message");
    retry_seconds =
        json_access::IntOr(json_access::MemberOrNull(j, "details"), "retryAfterSeconds", 0);
  } else {
    message = std::string(body.substr(0, 200));
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
      message.pop_back();
    }
  }
  int64_t header_seconds = 0;
  if (!retry_after.empty() && absl::SimpleAtoi(retry_after, &header_seconds)) {
    retry_seconds = header_seconds;
  }
  if (message.empty()) message = absl::StrCat("HTTP ", code);
  absl::Status s(CodeFor(code, reason), absl::StrCat(what, ": ", message, " (", reason, ")"));
  s.SetPayload(kReasonPayload, absl::Cord(reason));
  if (retry_seconds > 0) s.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(retry_seconds)));
  return s;
}

std::string Reason(const absl::Status& status) {
  auto p = status.GetPayload(kReasonPayload);
  return p ? std::string(*p) : std::string();
}

absl::Duration RetryAfter(const absl::Status& status) {
  auto p = status.GetPayload(kRetryAfterPayload);
  int64_t seconds = 0;
  if (p && absl::SimpleAtoi(std::string(*p), &seconds)) return absl::Seconds(seconds);
  return absl::ZeroDuration();
}

bool IsConflict(const absl::Status& s) { return Reason(s) == "Conflict"; }
bool IsGone(const absl::Status& s) {
  std::string r = Reason(s);
  return r == "Gone" || r == "Expired";
}
bool IsForbidden(const absl::Status& s) { return Reason(s) == "Forbidden"; }
bool IsUnauthorized(const absl::Status& s) { return Reason(s) == "Unauthorized"; }
bool IsInvalid(const absl::Status& s) { return Reason(s) == "Invalid"; }
bool IsTooManyRequests(const absl::Status& s) { return Reason(s) == "TooManyRequests"; }

}  // namespace dra::k8s
