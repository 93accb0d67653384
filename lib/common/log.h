#pragma once

// Structured logging in klog's text format, so that our lines read like any Kubernetes component:
//
//   I1121 23:55:00.123456   12345 prepare.cc:42] "prepared claim" claim="ns/name" uid="1f.." n=2
//
// Usage: DRA_INFO("message", "key", value, ...); DRA_VLOG(4, "message", "key", value);
// Keys are string literals; values are strings (quoted and escaped, as Go's strconv.Quote does for
// ASCII), integers, doubles, bools, enums (their number), absl::Status (its message, quoted, "ok"
// when OK), absl::Duration (quoted, "1.5s"), or anything with operator<< (quoted).
// Time stamps are UTC. DRA_VLOG(n, ...) does not evaluate its arguments when n > Verbosity().
//
// Thread-safety: every function here may be called from any thread; each line is written with a
// single write so lines from different threads never interleave.

#include <cstdint>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dra::log {

enum class Severity { kInfo, kWarning, kError, kFatal };

// Global verbosity for DRA_VLOG (klog's -v). Lines with level <= verbosity are written.
void SetVerbosity(int level);
int Verbosity();
inline bool VEnabled(int level) { return level <= Verbosity(); }

// Replaces where lines go (default: stderr). Used by tests; pass nullptr to restore stderr.
// The sink is called with an internal lock held, one whole line (ending in '\n') at a time; it
// must not log itself.
using Sink = std::function<void(std::string_view line)>;
void SetSink(Sink sink);

namespace internal {

void AppendQuoted(std::string& out, std::string_view s);

inline void AppendValue(std::string& out, std::string_view v) { AppendQuoted(out, v); }
inline void AppendValue(std::string& out, absl::string_view v) {
  AppendQuoted(out, std::string_view(v.data(), v.size()));
}
inline void AppendValue(std::string& out, const char* v) { AppendQuoted(out, v ? v : ""); }
inline void AppendValue(std::string& out, const std::string& v) { AppendQuoted(out, v); }
inline void AppendValue(std::string& out, bool v) { out += v ? "true" : "false"; }
inline void AppendValue(std::string& out, const absl::Status& v) {
  absl::string_view text = v.ok() ? absl::string_view("ok") : v.message();
  AppendQuoted(out, std::string_view(text.data(), text.size()));
}
inline void AppendValue(std::string& out, absl::Duration v) {
  AppendQuoted(out, absl::FormatDuration(v));
}
inline void AppendValue(std::string& out, char v) { AppendQuoted(out, std::string_view(&v, 1)); }
template <typename T>
requires std::is_arithmetic_v<T>
void AppendValue(std::string& out, T v) { absl::StrAppend(&out, v); }
template <typename T>
requires(!std::is_arithmetic_v<T> && !std::is_convertible_v<T, std::string_view> &&
         !std::is_convertible_v<T, absl::string_view>) void AppendValue(std::string& out,
                                                                        const T& v) {
  if constexpr (std::is_enum_v<T>) {
    absl::StrAppend(&out, static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_constructible_v<absl::AlphaNum, const T&>) {
    AppendQuoted(out, absl::StrCat(v));
  } else {
    static_assert(
        requires(std::ostream & os) { os << v; },
        "log values must be strings, numbers, bools, absl::Status, absl::Duration, "
        "enums or types with operator<<");
    std::ostringstream os;
    os << v;
    AppendQuoted(out, os.str());
  }
}

inline void AppendPairs(std::string&) {}
template <typename V, typename... Rest>
void AppendPairs(std::string& out, std::string_view key, const V& value, const Rest&... rest) {
  out += ' ';
  out += key;
  out += '=';
  AppendValue(out, value);
  AppendPairs(out, rest...);
}

// Writes the header, the quoted message and the already formatted pairs as one line.
void Write(Severity severity, const char* file, int line, std::string_view msg,
           std::string_view pairs);

}  // namespace internal

template <typename... KV>
void Emit(Severity severity, const char* file, int line, std::string_view msg, const KV&... kv) {
  static_assert(sizeof...(KV) % 2 == 0, "log key/value arguments must come in pairs");
  std::string pairs;
  internal::AppendPairs(pairs, kv...);
  internal::Write(severity, file, line, msg, pairs);
}

}  // namespace dra::log

#define DRA_INFO(...) ::dra::log::Emit(::dra::log::Severity::kInfo, __FILE__, __LINE__, __VA_ARGS__)
#define DRA_WARNING(...) \
  ::dra::log::Emit(::dra::log::Severity::kWarning, __FILE__, __LINE__, __VA_ARGS__)
#define DRA_ERROR(...) \
  ::dra::log::Emit(::dra::log::Severity::kError, __FILE__, __LINE__, __VA_ARGS__)
#define DRA_VLOG(level, ...)                                \
  do {                                                      \
    if (::dra::log::VEnabled(level)) DRA_INFO(__VA_ARGS__); \
  } while (false)
