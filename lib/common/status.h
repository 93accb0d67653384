#pragma once

// Helpers over absl::Status used everywhere: propagation macros and context annotation.
//
// Error messages are lower-case, without a trailing period, and gain context at each layer:
//   "write CDI spec /var/run/cdi/x.json: no space left on device".

#include <concepts>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra {

// Returns `status` with "<context>: " prepended to its message, keeping its code and payloads.
// An OK status is returned unchanged.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

// Maps an errno value to the closest absl code (ENOENT -> NotFound, EACCES -> PermissionDenied,
// ...), with message "<context>: <strerror, lower-cased>", e.g. "open /x: no such file or
// directory". An empty context gives just the strerror text. With an absl::string_view argument,
// write dra::ErrnoToStatus: argument-dependent lookup also finds absl::ErrnoToStatus.
absl::Status ErrnoToStatus(int errno_value, absl::string_view context);

// Debian's Abseil has its own absl::string_view, distinct from std::string_view; these accept the
// latter too (std::string and string literals go to the overloads above).
template <std::same_as<std::string_view> View>
absl::Status Annotate(const absl::Status& status, View context) {
  return Annotate(status, absl::string_view(context.data(), context.size()));
}
template <std::same_as<std::string_view> View>
absl::Status ErrnoToStatus(int errno_value, View context) {
  return dra::ErrnoToStatus(errno_value, absl::string_view(context.data(), context.size()));
}

}  // namespace dra

#define DRA_STATUS_CONCAT_INNER_(a, b) a##b
#define DRA_STATUS_CONCAT_(a, b) DRA_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if it is not OK.
#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    if (absl::Status dra_status_ = (expr); !dra_status_.ok()) { \
      return dra_status_;                                       \
    }                                                           \
  } while (false)

// Evaluates `expr` (an absl::StatusOr<T>); on error returns its status, otherwise moves the value
// into `lhs`, which may be a declaration ("auto x") or an existing lvalue.
#define ASSIGN_OR_RETURN(lhs, expr) \
  DRA_ASSIGN_OR_RETURN_IMPL_(DRA_STATUS_CONCAT_(dra_statusor_, __LINE__), lhs, expr)
// `tmp` names a variable and `lhs` may be a declaration (`auto x`): neither can take parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define DRA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return std::move(tmp).status();   \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
