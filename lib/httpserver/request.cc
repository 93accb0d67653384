#include "lib/httpserver/request.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dra::httpserver {
namespace {

ParsedRequest Error(int code, std::string body) {
  ParsedRequest p;
  p.state = ParsedRequest::State::kError;
  p.error_code = code;
  p.error_body = std::move(body);
  return p;
}

}  // namespace

absl::string_view HttpReasonPhrase(int code) {
  switch (code) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

ParsedRequest ParseHttpRequest(absl::string_view buf, size_t max_header, size_t max_body) {
  size_t header_end = buf.find("\r\n\r\n");
  if (header_end == absl::string_view::npos) {
    if (buf.size() > max_header) return Error(431, "request header too large\n");
    return ParsedRequest();
  }
  // Also when the header's end came in the same read as the bytes past the limit: the outcome must
  // not depend on how the bytes arrived.
  if (header_end + 4 > max_header) return Error(431, "request header too large\n");
  absl::string_view head = buf.substr(0, header_end);
  size_t line_end = head.find("\r\n");
  absl::string_view request_line = head.substr(0, line_end);
  absl::string_view headers =
      line_end == absl::string_view::npos ? absl::string_view() : head.substr(line_end + 2);

  std::vector<absl::string_view> parts = absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
    return Error(400, "malformed request line\n");
  }
  absl::string_view method = parts[0], target = parts[1], version = parts[2];
  if (!absl::StartsWith(version, "HTTP/1.")) return Error(505, "only HTTP/1.x is supported\n");
  ParsedRequest p;
  p.keep_alive = version != "HTTP/1.0";
  bool has_length = false;
  uint64_t length = 0;
  for (absl::string_view line : absl::StrSplit(headers, "\r\n")) {
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return Error(400, "malformed header line\n");
    absl::string_view name = line.substr(0, colon);
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "content-length")) {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(value, &v) || (has_length && v != length)) {
        return Error(400, "invalid Content-Length\n");
      }
      has_length = true;
      length = v;
    } else if (absl::EqualsIgnoreCase(name, "content-type")) {
      p.request.content_type = value;
    } else if (absl::EqualsIgnoreCase(name, "connection")) {
      std::string lower = absl::AsciiStrToLower(value);
      if (absl::StrContains(lower, "close")) p.keep_alive = false;
      if (absl::StrContains(lower, "keep-alive")) p.keep_alive = true;
    } else if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
      return Error(501, "Transfer-Encoding is not supported; send Content-Length\n");
    } else if (absl::EqualsIgnoreCase(name, "expect")) {
      p.expect_continue = absl::EqualsIgnoreCase(value, "100-continue");
    }
  }
  if (length > max_body) {
    return Error(413, absl::StrCat("request body of ", length, " bytes exceeds the limit of ",
                                   max_body, " bytes\n"));
  }
  if (!has_length && method == "POST") return Error(411, "Content-Length is required\n");
  size_t body_start = header_end + 4;
  p.size = body_start + length;
  if (buf.size() < p.size) {
    p.state = ParsedRequest::State::kNeedBody;
    return p;
  }
  p.state = ParsedRequest::State::kComplete;
  p.request.method = method;
  p.request.path = target.substr(0, target.find('?'));
  p.request.body = buf.substr(body_start, length);
  return p;
}

}  // namespace dra::httpserver
