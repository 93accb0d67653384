#include "lib/k8s/wire_decode.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/common/json_access.h"
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

}  // namespace

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
