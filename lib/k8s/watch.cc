// Client::Watch: the streaming half of the client. Kept apart from client.cc because it parses a
// newline-delimited stream of watch events instead of one JSON document.

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"
#include "lib/k8s/client.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/url.h"

namespace dra::k8s {
namespace {

absl::StatusOr<WatchEvent::Type> ParseType(absl::string_view t) {
  if (t == "ADDED") return WatchEvent::Type::kAdded;
  if (t == "MODIFIED") return WatchEvent::Type::kModified;
  if (t == "DELETED") return WatchEvent::Type::kDeleted;
  if (t == "BOOKMARK") return WatchEvent::Type::kBookmark;
  return absl::InvalidArgumentError(absl::StrCat("unknown watch event type \"", t, "\""));
}

}  // namespace

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

  std::string buffer;
  absl::Status event_error;
  auto on_data = [&](absl::string_view chunk) -> bool {
    buffer.append(chunk.data(), chunk.size());
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      absl::string_view line(buffer.data() + start, nl - start);
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        event_error = absl::InternalError(absl::StrCat(what, ": watch event is not valid JSON"));
        return false;
      }
      std::string type = j.value("type", "");
      if (type == "ERROR") {
        const nlohmann::json& st = j.value("object", nlohmann::json::object());
        long code = st.value("code", 500);
        event_error = StatusFromHttp(code, st.dump(), "", what);
        return false;
      }
      auto t = ParseType(type);
      if (!t.ok()) {
        event_error = Annotate(t.status(), what);
        return false;
      }
      if (!on_event(WatchEvent{*t, std::move(j["object"])})) {
        return false;
      }
    }
    buffer.erase(0, start);
    return true;
  };
  WaitForToken();
  ASSIGN_OR_RETURN(HttpResponse response, transport_->Stream(
                                              {.method = "GET",
                                               .path_and_query = ResourcePath(r, ns) + q,
                                               .timeout = absl::InfiniteDuration()},
                                              on_data, stopped ? stopped : [] { return false; }));
  if (response.code < 200 || response.code >= 300) {
    return StatusFromHttp(response.code, response.body, response.retry_after, what);
  }
  if (!event_error.ok()) return event_error;
  return absl::OkStatus();
}

}  // namespace dra::k8s
