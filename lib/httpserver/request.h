#pragma once

// HTTP/1.1 requests and responses of the server core (server.h), and the one request parser:
// finds one request at the start of a buffer (request line, headers, a Content-Length body) or
// says what is missing or wrong. Fuzzed by the http_request target (fuzz_targets.h).
//
// Thread-safety: plain data and pure functions.

#include <cstddef>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace dra::httpserver {

struct HttpRequest {
  absl::string_view method;
  absl::string_view path;  // request target without the query string
  absl::string_view content_type;
  absl::string_view body;
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Answers one request; the views of `request` are valid during the call only.
using HttpHandler = std::function<HttpResponse(const HttpRequest& request)>;

struct ParsedRequest {
  enum class State {
    kIncomplete,  // the header has not fully arrived
    kNeedBody,    // header parsed, the body has not fully arrived
    kComplete,    // `request` and `size` are set
    kError,       // answer `error_code` with `error_body`, then close
  };
  State state = State::kIncomplete;
  HttpRequest request;  // views into the buffer
  size_t size = 0;      // header and body: where the next request starts
  bool keep_alive = true;
  bool expect_continue = false;  // "Expect: 100-continue"
  int error_code = 0;
  std::string error_body;
};

// Parses the request at the start of `buf`. Bodies need Content-Length (chunked: 501), at most
// `max_body` bytes (413); headers at most `max_header` bytes (431).
ParsedRequest ParseHttpRequest(absl::string_view buf, size_t max_header, size_t max_body);

// "OK", "Not Found", ... for the status codes the server writes.
absl::string_view HttpReasonPhrase(int code);

}  // namespace dra::httpserver
