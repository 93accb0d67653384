#pragma once

// Query-string building shared by the client's request paths.

#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dra::k8s {

// Percent-encodes a query value; RFC 3986 unreserved characters pass through.
inline std::string QueryEscape(absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Appends "?key=value" or "&key=value"; an empty value adds nothing.
inline void AddQueryParam(std::string& query, absl::string_view key, absl::string_view value) {
  if (value.empty()) return;
  query += query.empty() ? '?' : '&';
  absl::StrAppend(&query, key, "=", QueryEscape(value));
}

}  // namespace dra::k8s
