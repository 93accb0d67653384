// Client::Watch: the streaming half of the client. Kept apart from client.cc because it parses a
// newline-delimited stream of watch events instead of one JSON document.

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/client.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/http.h"
#include "lib/k8s/url.h"
#include "lib/k8s/wire_decode.h"

namespace dra::k8s {

absl::Status Client::Watch(const ResourceInfo& r, absl::string_view ns, const WatchOptions& o,
                           const std::function<bool(WatchEvent&&)>& on_event,
                           const std::function<bool()>& stopped) {
  std::string what = absl::StrCat("watch ", r.plural, r.group.empty() ? "" : ".", r.group);
  std::string q;
  AddQueryParam(q, "watch", "true");
  AddQueryParam(q, "labelSelector", o.label_selector);
  AddQueryParam(q, "fieldSelector", o.field_selector);
  AddQueryParam(q, "resourceVersion", o.resource_version);
  if (o.allow_bookmarks) AddQueryParam(q, "allowWatchBookmarks", "true");
  if (o.timeout_seconds > 0) AddQueryParam(q, "timeoutSeconds", absl::StrCat(o.timeout_seconds));
  const std::string path = ResourcePath(r, ns) + q;

  WatchLineSplitter splitter(options_.max_watch_line_bytes);
  absl::Status event_error;
  // One line: a line that is not JSON ends the watch (the stream's framing is in doubt, and the
  // caller resumes from its last resourceVersion); a JSON line that is not a watch event is
  // skipped with a warning, and an object nested too deep comes as its identity
  // (WatchEvent::undecodable), so one bad event cannot stall the watch in a resume loop.
  auto on_line = [&](absl::string_view line) -> bool {
    WatchLineError error = WatchLineError::kEvent;
    absl::StatusOr<WatchLine> decoded = ParseWatchLine(line, what, &error);
    if (!decoded.ok() && error == WatchLineError::kNotJson) {
      event_error = absl::InternalError(
          absl::StrCat(what, ": watch event: ", decoded.status().message(), ", starting \"",
                       absl::CHexEscape(line.substr(0, 64)), "\""));
      return false;
    }
    if (!decoded.ok()) {
      DRA_WARNING("skipping malformed watch event", "watch", what, "err", decoded.status(), "line",
                  absl::CHexEscape(line.substr(0, 200)));
      return true;
    }
    if (!decoded->server_error.ok()) {
      event_error = decoded->server_error;
      return false;
    }
    return on_event(*std::move(decoded->event));
  };
  auto on_data = [&](absl::string_view chunk) -> bool {
    absl::StatusOr<bool> go_on = splitter.Feed(chunk, on_line);
    if (!go_on.ok()) {
      event_error =
          Annotate(go_on.status(), absl::StrCat(what, ": GET ", transport_->config().server, path));
      return false;
    }
    return *go_on;
  };
  WaitForToken();
  // No whole-request timeout (the server ends the watch after timeoutSeconds), but an idle limit:
  // a connection that died without a close would otherwise leave the caller's view stale until
  // the kernel gives up on the socket.
  absl::StatusOr<HttpResponse> streamed = transport_->Stream(
      {.method = "GET",
       .path_and_query = path,
       .timeout = absl::InfiniteDuration(),
       .idle_timeout = options_.watch_idle_timeout,
       .max_body_bytes = options_.max_body_bytes},
      on_data, stopped ? stopped : [] { return false; });
  if (!streamed.ok()) {
    if (IsIdleTimeout(streamed.status())) {
      DRA_WARNING("watch received nothing for the idle limit; closing it as a dead connection",
                  "watch", what, "idle_limit", absl::FormatDuration(options_.watch_idle_timeout));
    }
    return streamed.status();
  }
  const HttpResponse& response = *streamed;
  if (response.code < 200 || response.code >= 300) {
    return StatusFromHttp(response.code, response.body, response.retry_after, what);
  }
  if (!event_error.ok()) return event_error;
  return absl::OkStatus();
}

}  // namespace dra::k8s
