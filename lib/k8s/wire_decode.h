#pragma once

// The envelopes the API server sends around objects, checked before anything reads them: a page of
// a list response, and the lines of a watch stream. Objects inside are left to the typed codecs
// (object_meta.h, objects_*.h), which skip or refuse one malformed object without touching the
// others. Nothing here throws; errors use the paths and words of lib/common/json_access.h.
//
// Thread-safety: free functions are thread-safe; a WatchLineSplitter belongs to one stream.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/client.h"
#include "lib/metrics/metrics.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// One page of a list response: {"items": [...], "metadata": {"resourceVersion", "continue"}}.
struct ListPage {
  std::vector<nlohmann::json> items;  // each one a JSON object
  // Items that cannot be read whole (ParseListPage), in none of `items`.
  std::vector<UndecodableObject> undecodable;
  std::string resource_version;
  std::string continue_token;
};

// Parses and takes apart one page of a list response as the API server sends it. An item nested
// deeper than json_access::kMaxDepth (counted from the item) goes to `undecodable` with its
// identity, and the rest of the page reads as usual; the parse never recurses, whatever the depth.
// Errors: those of json_access::Parse and DecodeListPage, and "list page nested deeper than 512
// levels outside its items" (the envelope itself, which the API server never sends).
absl::StatusOr<ListPage> ParseListPage(absl::string_view body);

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

// Parses and decodes one line of a watch stream. An event whose object is nested deeper than
// json_access::kMaxDepth (counted from the object) is delivered with WatchEvent::undecodable set
// and only the object's identity, so that the stream goes on past it. Errors, with *error set to
// kNotJson: a line that is not JSON (json_access::Parse's words; the stream's framing is in
// doubt); kEvent: a JSON line that is not a watch event (DecodeWatchLine's words).
enum class WatchLineError { kNotJson, kEvent };
absl::StatusOr<WatchLine> ParseWatchLine(absl::string_view line, absl::string_view what,
                                         WatchLineError* error);

// The identity of `object` (metadata's namespace, name, uid, resourceVersion, read leniently) and
// `reason`; the stub {"metadata": {...}} carrying that identity; "namespace/name" or "name".
UndecodableObject IdentityOf(const nlohmann::json& object, std::string reason);
nlohmann::json StubOf(const UndecodableObject& o);
std::string KeyOf(const UndecodableObject& o);

// Logs a warning and counts an object of `r` that cannot be read or decoded (`o.reason` says
// why), once per resource, key and resourceVersion for the life of the process: a relist or a
// resumed watch that meets the same version again stays quiet. (The last 10,000 are remembered;
// past that an old one may be logged and counted again.) Thread-safe.
void ReportUndecodable(const ResourceInfo& r, const UndecodableObject& o);
// Called once per counted object with its resource ("resourceclaims.resource.k8s.io"), under a
// lock: keep it short (a counter). Null to unset; once unset, no call is in progress.
void SetUndecodableObserver(std::function<void(const std::string& resource)> observer);

// Registers nvidia_dra_undecodable_objects_total{resource} in `registry` and counts every
// reported object there while alive (the process's single observer). Declare it after the
// registry, so that it goes first.
class UndecodableObjectsMetric {
 public:
  explicit UndecodableObjectsMetric(metrics::Registry* registry);
  ~UndecodableObjectsMetric();
  UndecodableObjectsMetric(const UndecodableObjectsMetric&) = delete;
  UndecodableObjectsMetric& operator=(const UndecodableObjectsMetric&) = delete;
};
// Objects counted so far for `resource` ("" for all), for tests.
int64_t UndecodableCount(absl::string_view resource = "");

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
