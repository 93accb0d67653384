#include "lib/k8s/wire_decode.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"

namespace dra::k8s {
namespace {

namespace ja = json_access;

absl::StatusOr<WatchEvent::Type> ParseType(const std::string& t) {
  if (t == "ADDED") return WatchEvent::Type::kAdded;
  if (t == "MODIFIED") return WatchEvent::Type::kModified;
  if (t == "DELETED") return WatchEvent::Type::kDeleted;
  if (t == "BOOKMARK") return WatchEvent::Type::kBookmark;
  return absl::InvalidArgumentError(
      absl::StrCat("type: unknown watch event type \"", absl::CEscape(t.substr(0, 64)),
                   "\", allowed: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR"));
}

std::string DeepReason() { return absl::StrCat("nested deeper than ", ja::kMaxDepth, " levels"); }

std::string ResourceName(const ResourceInfo& r) {
  return r.group.empty() ? std::string(r.plural) : absl::StrCat(r.plural, ".", r.group);
}

struct UndecodableLog {
  absl::Mutex mu;
  // resource, key, resourceVersion of the objects reported; cleared when it reaches kRemembered.
  absl::flat_hash_set<std::string> seen ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, int64_t> counts ABSL_GUARDED_BY(mu);
  std::function<void(const std::string&)> observer ABSL_GUARDED_BY(mu);
};
constexpr size_t kRemembered = 10000;

UndecodableLog& Undecodables() {
  static UndecodableLog* const kLog = new UndecodableLog();
  return *kLog;
}

}  // namespace

UndecodableObject IdentityOf(const nlohmann::json& object, std::string reason) {
  const nlohmann::json& meta = ja::MemberOrNull(object, "metadata");
  return {.namespace_name = ja::StringOr(meta, "namespace"),
          .name = ja::StringOr(meta, "name"),
          .uid = ja::StringOr(meta, "uid"),
          .resource_version = ja::StringOr(meta, "resourceVersion"),
          .reason = std::move(reason)};
}

nlohmann::json StubOf(const UndecodableObject& o) {
  nlohmann::json meta = nlohmann::json::object();
  if (!o.namespace_name.empty()) meta["namespace"] = o.namespace_name;
  if (!o.name.empty()) meta["name"] = o.name;
  if (!o.uid.empty()) meta["uid"] = o.uid;
  if (!o.resource_version.empty()) meta["resourceVersion"] = o.resource_version;
  return nlohmann::json{{"metadata", std::move(meta)}};
}

std::string KeyOf(const UndecodableObject& o) {
  return o.namespace_name.empty() ? o.name : absl::StrCat(o.namespace_name, "/", o.name);
}

void ReportUndecodable(const ResourceInfo& r, const UndecodableObject& o) {
  const std::string resource = ResourceName(r);
  {
    UndecodableLog& log = Undecodables();
    absl::MutexLock lock(&log.mu);
    std::string id = absl::StrCat(resource, "\n", KeyOf(o), "\n", o.resource_version);
    if (log.seen.contains(id)) return;
    if (log.seen.size() >= kRemembered) log.seen.clear();
    log.seen.insert(std::move(id));
    ++log.counts[resource];
    if (log.observer) log.observer(resource);
  }
  DRA_WARNING(
      "skipping an object that cannot be decoded; the API server holds it, the driver "
      "does not see it",
      "resource", resource, "object", KeyOf(o), "uid", o.uid, "resourceVersion", o.resource_version,
      "reason", o.reason);
}

void SetUndecodableObserver(std::function<void(const std::string& resource)> observer) {
  UndecodableLog& log = Undecodables();
  absl::MutexLock lock(&log.mu);
  log.observer = std::move(observer);
}

UndecodableObjectsMetric::UndecodableObjectsMetric(metrics::Registry* registry) {
  metrics::Family<metrics::Counter>* family = registry->AddCounter(
      "nvidia_dra_undecodable_objects_total",
      "Objects the API server holds that this process skips because it cannot decode them "
      "(nested deeper than 512 levels, or not of their kind's shape); each version counted once.",
      {"resource"});
  SetUndecodableObserver(
      [family](const std::string& resource) { family->WithLabels({resource})->Inc(); });
}

UndecodableObjectsMetric::~UndecodableObjectsMetric() { SetUndecodableObserver(nullptr); }

int64_t UndecodableCount(absl::string_view resource) {
  UndecodableLog& log = Undecodables();
  absl::MutexLock lock(&log.mu);
  int64_t n = 0;
  for (const auto& [k, v] : log.counts) {
    if (resource.empty() || k == resource) n += v;
  }
  return n;
}

absl::StatusOr<ListPage> ParseListPage(absl::string_view body) {
  std::set<std::string> cut;
  // Page, items array, item: an item's own depth limit is kMaxDepth.
  ASSIGN_OR_RETURN(nlohmann::json j, ja::ParseCuttingDeep(body, ja::kMaxDepth + 2, 2, &cut));
  ASSIGN_OR_RETURN(ListPage page, DecodeListPage(std::move(j)));
  if (cut.empty()) return page;
  std::vector<nlohmann::json> kept;
  kept.reserve(page.items.size());
  for (size_t i = 0; i < page.items.size(); ++i) {
    if (cut.erase(ja::IndexPath("items", i)) > 0) {
      page.undecodable.push_back(IdentityOf(page.items[i], DeepReason()));
    } else {
      kept.push_back(std::move(page.items[i]));
    }
  }
  if (!cut.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("list page nested deeper than ", ja::kMaxDepth,
                                                   " levels outside its items, at ", *cut.begin()));
  }
  page.items = std::move(kept);
  return page;
}

absl::StatusOr<WatchLine> ParseWatchLine(absl::string_view line, absl::string_view what,
                                         WatchLineError* error) {
  std::set<std::string> cut;
  // Line, object: the object's own depth limit is kMaxDepth.
  absl::StatusOr<nlohmann::json> j = ja::ParseCuttingDeep(line, ja::kMaxDepth + 1, 1, &cut);
  if (!j.ok()) {
    *error = WatchLineError::kNotJson;
    return j.status();
  }
  std::optional<UndecodableObject> undecodable;
  if (cut.erase("object") > 0) {
    undecodable = IdentityOf(ja::MemberOrNull(*j, "object"), DeepReason());
  }
  if (!cut.empty()) {
    *error = WatchLineError::kEvent;
    return absl::InvalidArgumentError(absl::StrCat(
        "nested deeper than ", ja::kMaxDepth, " levels outside the object, at ", *cut.begin()));
  }
  absl::StatusOr<WatchLine> decoded = DecodeWatchLine(*std::move(j), what);
  if (!decoded.ok()) {
    *error = WatchLineError::kEvent;
    return decoded.status();
  }
  if (undecodable.has_value() && decoded->event.has_value()) {
    decoded->event->object = StubOf(*undecodable);
    decoded->event->undecodable = std::move(undecodable);
  }
  return decoded;
}

absl::StatusOr<ListPage> DecodeListPage(nlohmann::json page) {
  RETURN_IF_ERROR(ja::ExpectObject(page, ""));
  ListPage out;
  ASSIGN_OR_RETURN(const nlohmann::json* meta, ja::GetOptionalObject(page, "", "metadata"));
  if (meta != nullptr) {
    ASSIGN_OR_RETURN(std::optional<std::string> rv,
                     ja::GetOptionalString(*meta, "metadata", "resourceVersion"));
    ASSIGN_OR_RETURN(std::optional<std::string> cont,
                     ja::GetOptionalString(*meta, "metadata", "continue"));
    out.resource_version = rv.value_or("");
    out.continue_token = cont.value_or("");
  }
  ASSIGN_OR_RETURN(const nlohmann::json* items, ja::GetOptionalArray(page, "", "items"));
  if (items == nullptr) return out;
  for (size_t i = 0; i < items->size(); ++i) {
    RETURN_IF_ERROR(ja::ExpectObject((*items)[i], ja::IndexPath("items", i)));
  }
  nlohmann::json& owned = page["items"];  // page is an object holding an array here
  out.items.reserve(owned.size());
  for (nlohmann::json& item : owned) out.items.push_back(std::move(item));
  return out;
}

absl::StatusOr<WatchLine> DecodeWatchLine(nlohmann::json line, absl::string_view what) {
  RETURN_IF_ERROR(ja::ExpectObject(line, ""));
  ASSIGN_OR_RETURN(std::string type, ja::GetString(line, "", "type"));
  WatchLine out;
  if (type == "ERROR") {
    // A metav1.Status. Only read for its words: whatever its shape, the watch ends with an error.
    const nlohmann::json& st = ja::MemberOrNull(line, "object");
    const int64_t code = ja::IntOr(st, "code", 500);
    out.server_error = StatusFromHttp(code, st.is_object() ? st.dump() : "", "", what);
    if (out.server_error.ok()) {
      out.server_error = absl::InternalError(absl::StrCat(what, ": watch ERROR event"));
    }
    return out;
  }
  ASSIGN_OR_RETURN(WatchEvent::Type t, ParseType(type));
  ASSIGN_OR_RETURN(const nlohmann::json* object, ja::GetObject(line, "", "object"));
  (void)object;  // checked; moved out below
  out.event = WatchEvent{t, std::move(line["object"])};
  return out;
}

absl::StatusOr<bool> WatchLineSplitter::Feed(
    absl::string_view chunk, const std::function<bool(absl::string_view)>& on_line) {
  auto too_long = [this] {
    return absl::ResourceExhaustedError(absl::StrCat("watch event line longer than the ",
                                                     ByteLimitText(max_line_bytes_), " limit"));
  };
  while (!chunk.empty()) {
    size_t nl = chunk.find('\n');
    absl::string_view piece = chunk.substr(0, nl);
    if (buffer_.size() + piece.size() > max_line_bytes_) return too_long();
    if (nl == absl::string_view::npos) {
      buffer_.append(piece.data(), piece.size());
      return true;
    }
    chunk.remove_prefix(nl + 1);
    absl::string_view line = piece;
    if (!buffer_.empty()) {
      buffer_.append(piece.data(), piece.size());
      line = buffer_;
    }
    bool go_on = line.empty() || on_line(line);
    buffer_.clear();
    if (!go_on) return false;
  }
  return true;
}

}  // namespace dra::k8s
