#pragma once

// HTTP/1.1 request framing for the webhook's server: finds one request at the start of a buffer
// (request line, headers, a Content-Length body) or says what is missing or wrong.
//
// Thread-safety: a pure function.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/webhook/https_server.h"

namespace dra::webhook {

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

}  // namespace dra::webhook
