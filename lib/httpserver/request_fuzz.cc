#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/httpserver/fuzz_targets.h"
#include "lib/httpserver/request.h"

namespace dra::httpserver::fuzz {
namespace {

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

bool Within(absl::string_view part, absl::string_view buf) {
  return part.empty() ||
         (part.data() >= buf.data() && part.data() + part.size() <= buf.data() + buf.size());
}

// What the server would act on: a complete request (its size and fields) or an error.
bool SameOutcome(const ParsedRequest& a, const ParsedRequest& b) {
  if (a.state != b.state) return false;
  if (a.state == ParsedRequest::State::kError) return a.error_code == b.error_code;
  return a.size == b.size && a.keep_alive == b.keep_alive &&
         a.expect_continue == b.expect_continue && a.request.method == b.request.method &&
         a.request.path == b.request.path && a.request.content_type == b.request.content_type &&
         a.request.body == b.request.body;
}

}  // namespace

void HttpRequest(const uint8_t* data, size_t size) {
  if (size < 2) return;
  // The first byte picks the piece size (1..256), the second the limits, so that both the header
  // limit (431) and the body limit (413) are within reach of small inputs.
  const size_t piece = static_cast<size_t>(data[0]) + 1;
  const size_t max_header = 64 + (static_cast<size_t>(data[1] & 0x0f) << 6);  // 64..1024
  const size_t max_body = static_cast<size_t>(data[1] >> 4) << 6;             // 0..960
  const absl::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::string buf;  // what the connection holds: the current request's bytes so far
  size_t offset = 0;
  while (offset < input.size()) {
    const absl::string_view chunk = input.substr(offset, piece);
    offset += chunk.size();
    buf.append(chunk.data(), chunk.size());
    // Pipelined requests may already be complete in the buffer: answer each in turn.
    while (true) {
      const ParsedRequest p = ParseHttpRequest(buf, max_header, max_body);
      // The same bytes in one piece: what the connection holds plus everything still to come.
      // (The request's views point into `whole`: compared before it goes.)
      auto same_at_once = [&](const ParsedRequest& pieces) {
        const std::string whole = buf + std::string(input.substr(offset));
        return SameOutcome(pieces, ParseHttpRequest(whole, max_header, max_body));
      };
      switch (p.state) {
        case ParsedRequest::State::kIncomplete:
          if (buf.size() > max_header) Violation("incomplete header past the header limit");
          break;
        case ParsedRequest::State::kNeedBody:
          if (p.size <= buf.size()) Violation("needs a body that has arrived");
          if (p.size > max_header + max_body) Violation("request larger than the limits");
          break;
        case ParsedRequest::State::kError:
          if (p.error_code < 400 || p.error_code > 599 || p.error_body.empty()) {
            Violation("error without a 4xx/5xx code and a body");
          }
          if (!same_at_once(p)) Violation("error depends on how the bytes arrived");
          return;  // the connection answers and closes
        case ParsedRequest::State::kComplete:
          if (p.size == 0 || p.size > buf.size()) Violation("complete request outside the buffer");
          if (p.request.body.size() > max_body) Violation("body over the limit");
          if (p.size > max_header + max_body) Violation("request larger than the limits");
          if (!Within(p.request.method, buf) || !Within(p.request.path, buf) ||
              !Within(p.request.content_type, buf) || !Within(p.request.body, buf)) {
            Violation("request fields outside the buffer");
          }
          if (!same_at_once(p)) Violation("request depends on how the bytes arrived");
          if (!p.keep_alive) return;
          buf.erase(0, p.size);
          continue;
      }
      break;
    }
  }
}

}  // namespace dra::httpserver::fuzz
