#pragma once

// The envelopes the API server sends around objects, checked before anything reads them: a page of
// a list response, and the lines of a watch stream. Objects inside are left to the typed codecs
// (object_meta.h, objects_*.h), which skip or refuse one malformed object without touching the
// others. Nothing here throws; errors use the paths and words of lib/common/json_access.h.
//
// Thread-safety: free functions are thread-safe; a WatchLineSplitter belongs to one stream.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/client.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// One page of a list response: {"items": [...], "metadata": {"resourceVersion", "continue"}}.
struct ListPage {
  std::vector<nlohmann::json> items;  // each one a JSON object
  std::string resource_version;
  std::string continue_token;
};

// Takes the page apart. Absent or null items/metadata read as empty. Errors (InvalidArgument):
// "expected object, got array" (the page), "items: expected array, got object", "items[2]:
// expected object, got string", "metadata.resourceVersion: expected string, got integer". A page
// with one non-object item is refused whole: the API server never sends one, and a caller that
// skipped it would take a partial list for the whole collection.
absl::StatusOr<ListPage> DecodeListPage(nlohmann::json page);

// What one line of a watch stream says.
struct WatchLine {
  std::optional<WatchEvent> event;  // ADDED, MODIFIED, DELETED or BOOKMARK
  absl::Status server_error;        // an ERROR event: the status the server sent (never OK)
};

// Decodes one parsed line. `what` ("watch resourceslices.resource.k8s.io") prefixes the server's
// error. Errors (InvalidArgument) for a line that is not a watch event: "expected object, got
// array", "type: expected string, got integer", "type: unknown watch event type \"X\", allowed:
// ADDED, MODIFIED, DELETED, BOOKMARK, ERROR", "object: expected object, got string".
absl::StatusOr<WatchLine> DecodeWatchLine(nlohmann::json line, absl::string_view what);

// Cuts a watch stream (newline-delimited JSON, in chunks of any size) into lines, holding at most
// `max_line_bytes` of an unfinished line.
class WatchLineSplitter {
 public:
  explicit WatchLineSplitter(size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

  // Calls `on_line` for each complete, non-empty line in order (without its "\n"); stops early when
  // it returns false (and returns false). Fails with ResourceExhausted "watch event line longer
  // than the <limit> limit" when a line grows past the limit; the stream is then unusable.
  absl::StatusOr<bool> Feed(absl::string_view chunk,
                            const std::function<bool(absl::string_view)>& on_line);

 private:
  const size_t max_line_bytes_;
  std::string buffer_;  // the unfinished line
};

}  // namespace dra::k8s
