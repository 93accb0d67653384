#pragma once

// An incremental HTTP/1.1 response parser: bytes go in as they arrive from the socket, in pieces
// of any size; the status line and headers are collected, and the body comes out through a
// callback with its framing (Content-Length, chunked transfer encoding or read-until-close)
// removed. Malformed input is an error naming what was wrong, never a crash or an endless wait.
//
// Only what a client of the Kubernetes API server needs: no trailers are kept, no content codings
// (we never send Accept-Encoding), interim 1xx responses are skipped.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dra::k8s {

struct ResponseHead {
  int code = 0;
  int minor_version = 1;                                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  // The value of the first header named `name` (lower case), or "".
  std::string Header(absl::string_view name) const;
};

class ResponseParser {
 public:
  // Receives body bytes; returns false to stop parsing (Feed then returns early, aborted() true).
  using BodySink = std::function<bool(absl::string_view)>;

  // `head_request`: the response to a HEAD request has no body whatever its headers say.
  explicit ResponseParser(bool head_request = false) : head_request_(head_request) {}

  // Consumes `data`. Body bytes are handed to `sink` (in one or more pieces), only after the head
  // is complete. Bytes past the end of the response are counted in extra_bytes().
  absl::Status Feed(absl::string_view data, const BodySink& sink);

  // The peer closed the connection. OK when the response is complete (or its body was delimited
  // by the close); an error otherwise, saying how far the response had got.
  absl::Status Finish();

  bool started() const { return bytes_seen_ > 0; }  // any byte of a response arrived
  bool head_done() const { return state_ > State::kHeaders; }
  bool done() const { return state_ == State::kDone; }
  bool aborted() const { return aborted_; }
  const ResponseHead& head() const { return head_; }
  // Whether the connection can carry another request after this response: HTTP/1.1 without
  // "Connection: close" (or 1.0 with keep-alive), a self-delimited body, nothing extra received.
  bool reusable() const { return done() && keep_alive_ && extra_bytes_ == 0 && !aborted_; }
  size_t extra_bytes() const { return extra_bytes_; }

  // Limits on a response's head and on one chunk-size or trailer line.
  static constexpr size_t kMaxHeadBytes = size_t{256} * 1024;
  static constexpr size_t kMaxLineBytes = size_t{8} * 1024;

 private:
  enum class State {
    kStatusLine,
    kHeaders,
    kBody,        // Content-Length: remaining_ bytes left
    kUntilClose,  // no length: everything until the peer closes
    kChunkSize,
    kChunkData,  // remaining_ bytes left in this chunk
    kChunkDataEnd,
    kTrailers,
    kDone,
  };

  // Takes one line (without its line end) from `data` into line_ when complete; returns whether a
  // whole line is in line_. `limit` bounds the line's length.
  absl::Status TakeLine(absl::string_view& data, size_t limit, bool& complete);
  absl::Status OnStatusLine(absl::string_view line);
  absl::Status OnHeaderLine(absl::string_view line);
  absl::Status OnHeadEnd();
  absl::Status OnChunkSizeLine(absl::string_view line);
  bool Deliver(absl::string_view bytes, const BodySink& sink);

  const bool head_request_;
  State state_ = State::kStatusLine;
  ResponseHead head_;
  std::string line_;
  size_t head_bytes_ = 0;
  uint64_t bytes_seen_ = 0;
  uint64_t remaining_ = 0;
  uint64_t body_bytes_ = 0;
  bool keep_alive_ = true;
  bool aborted_ = false;
  size_t extra_bytes_ = 0;
};

}  // namespace dra::k8s
