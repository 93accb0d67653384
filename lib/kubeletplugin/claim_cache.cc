#include "lib/kubeletplugin/claim_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/backoff.h"
#include "lib/common/log.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/wire_decode.h"

namespace dra::kubeletplugin {
namespace {

constexpr int64_t kWatchTimeoutSeconds = 240;

// `j[key]` when `j` is an object holding `key`, else null (never throws).
const nlohmann::json& Member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string StringMember(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = Member(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::string KeyOf(const nlohmann::json& claim) {
  const nlohmann::json& meta = Member(claim, "metadata");
  return absl::StrCat(StringMember(meta, "namespace"), "/", StringMember(meta, "name"));
}

std::string VersionOf(const nlohmann::json& claim) {
  return StringMember(Member(claim, "metadata"), "resourceVersion");
}

}  // namespace

const char* ClaimCache::ResultName(Result r) {
  switch (r) {
    case Result::kHit:
      return "hit";
    case Result::kMiss:
      return "miss";
    case Result::kStale:
      return "stale";
  }
  return "unknown";
}

bool ClaimCache::Relevant(const nlohmann::json& claim) const {
  const nlohmann::json& status = Member(claim, "status");
  const nlohmann::json& reserved = Member(status, "reservedFor");
  if (!reserved.is_array() || reserved.empty()) return false;
  const nlohmann::json& results =
      Member(Member(Member(status, "allocation"), "devices"), "results");
  if (!results.is_array()) return false;
  for (const nlohmann::json& r : results) {
    if (StringMember(r, "driver") == options_.driver_name &&
        StringMember(r, "pool") == options_.node_name) {
      return true;
    }
  }
  return false;
}

void ClaimCache::PutLocked(std::map<std::string, Ptr>& into, const nlohmann::json& claim) {
  const std::string key = KeyOf(claim);
  const std::string version = VersionOf(claim);
  if (auto mark = unprepared_.find(key); mark != unprepared_.end()) {
    if (mark->second == version) {  // the copy an unprepare dropped: not taken again
      into.erase(key);
      return;
    }
    unprepared_.erase(mark);  // a newer version (watch events come in order)
  }
  if (!Relevant(claim)) {
    into.erase(key);
    return;
  }
  absl::StatusOr<k8s::ResourceClaim> decoded = k8s::ResourceClaim::FromJson(claim);
  if (!decoded.ok()) {  // not kept: prepare GETs it
    k8s::ReportUndecodable(k8s::ResourceClaim::kResource,
                           k8s::IdentityOf(claim, std::string(decoded.status().message())));
    into.erase(key);
    return;
  }
  // Prepare reads the decoded fields only: the raw JSON and managedFields (metadata's unknown
  // fields) would be most of a kept claim's memory (docs/performance.md "Memory").
  decoded->raw = nlohmann::json();
  decoded->metadata.unknown_fields = nlohmann::json();
  into[key] = std::make_shared<const k8s::ResourceClaim>(*std::move(decoded));
}

void ClaimCache::BeginRelist() {
  absl::MutexLock lock(&mu_);
  pending_.clear();
}

void ClaimCache::AddPage(const nlohmann::json& items) {
  if (!items.is_array()) return;
  absl::MutexLock lock(&mu_);
  for (const nlohmann::json& claim : items) PutLocked(pending_, claim);
}

void ClaimCache::EndRelist() {
  {
    absl::MutexLock lock(&mu_);
    items_ = std::move(pending_);
    pending_.clear();
  }
  if (!synced_.HasBeenNotified()) synced_.Notify();
}

void ClaimCache::Apply(const k8s::WatchEvent& event) {
  absl::MutexLock lock(&mu_);
  switch (event.type) {
    case k8s::WatchEvent::Type::kAdded:
    case k8s::WatchEvent::Type::kModified:
      if (event.undecodable) {  // not kept (see the header); `object` is its identity
        k8s::ReportUndecodable(k8s::ResourceClaim::kResource, *event.undecodable);
        items_.erase(KeyOf(event.object));
        break;
      }
      PutLocked(items_, event.object);
      break;
    case k8s::WatchEvent::Type::kDeleted: {
      const std::string key = KeyOf(event.object);
      items_.erase(key);
      unprepared_.erase(key);
      break;
    }
    case k8s::WatchEvent::Type::kBookmark:
      break;
  }
}

std::shared_ptr<const k8s::ResourceClaim> ClaimCache::Find(const ClaimRef& ref) {
  Ptr found;
  Result result = Result::kMiss;
  {
    absl::MutexLock lock(&mu_);
    auto it = items_.find(ref.String());
    if (it != items_.end()) {
      if (it->second->metadata.uid == ref.uid && it->second->status.allocation.has_value()) {
        found = it->second;
        result = Result::kHit;
      } else {
        result = Result::kStale;
      }
    }
    switch (result) {
      case Result::kHit:
        ++counts_.hits;
        break;
      case Result::kMiss:
        ++counts_.misses;
        break;
      case Result::kStale:
        ++counts_.stale;
        break;
    }
  }
  if (options_.on_lookup) options_.on_lookup(result);
  return found;
}

void ClaimCache::Unprepared(const ClaimRef& ref) {
  absl::MutexLock lock(&mu_);
  auto it = items_.find(ref.String());
  if (it == items_.end() || it->second->metadata.uid != ref.uid) return;
  unprepared_[ref.String()] = it->second->metadata.resource_version;
  items_.erase(it);
}

size_t ClaimCache::size() const {
  absl::MutexLock lock(&mu_);
  return items_.size();
}

ClaimCache::Counts ClaimCache::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

void ClaimCache::Start(k8s::Client* client) {
  thread_ = std::thread([this, client] { Run(client); });
}

void ClaimCache::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void ClaimCache::Run(k8s::Client* client) {
  Backoff backoff({.initial = absl::Milliseconds(200), .max = absl::Seconds(5), .jitter = 0.5});
  auto pause = [&] { return !stop_.WaitForNotificationWithTimeout(backoff.Next()); };
  const k8s::ResourceInfo& resource = k8s::ResourceClaim::kResource;
  std::string rv;
  bool need_list = true;
  while (!stop_.HasBeenNotified()) {
    if (need_list) {
      // Page by page, each filtered before the next is read: memory follows this node's claims.
      BeginRelist();
      k8s::ListOptions options{.limit = options_.page_size};
      absl::Status failed;
      std::string list_rv;
      while (true) {
        absl::StatusOr<k8s::ListPage> page = client->ListPageOf(resource, "", options);
        if (!page.ok()) {
          failed = page.status();
          break;
        }
        if (list_rv.empty()) list_rv = page->resource_version;
        AddPage(nlohmann::json(std::move(page->items)));
        // Not kept (see the header): left out of this relist.
        for (const k8s::UndecodableObject& u : page->undecodable) {
          k8s::ReportUndecodable(resource, u);
        }
        options.continue_token = std::move(page->continue_token);
        if (options.continue_token.empty()) break;
      }
      if (!failed.ok()) {
        DRA_WARNING("claim cache: list failed; retrying", "err", failed);
        if (!pause()) return;
        continue;
      }
      rv = list_rv;
      EndRelist();
      need_list = false;
      backoff.Reset();
      DRA_VLOG(2, "claim cache: listed", "kept", size(), "resourceVersion", rv);
    }
    k8s::WatchOptions wo{
        .resource_version = rv, .allow_bookmarks = true, .timeout_seconds = kWatchTimeoutSeconds};
    bool got_event = false;
    const absl::Time watch_start = absl::Now();
    absl::Status s = client->Watch(
        resource, "", wo,
        [&](k8s::WatchEvent&& e) {
          got_event = true;
          std::string event_rv = VersionOf(e.object);
          Apply(e);
          if (!event_rv.empty()) rv = std::move(event_rv);
          return !stop_.HasBeenNotified();
        },
        [this] { return stop_.HasBeenNotified(); });
    if (stop_.HasBeenNotified()) return;
    if (k8s::IsGone(s)) {
      DRA_VLOG(2, "claim cache: watch history expired; relisting", "rv", rv);
      need_list = true;
      continue;
    }
    if (!s.ok()) {
      DRA_VLOG(1, "claim cache: watch ended with error; resuming", "rv", rv, "err", s);
      if (!pause()) return;
      continue;
    }
    if (got_event) {
      backoff.Reset();
    } else if (absl::Now() - watch_start < absl::Seconds(1)) {
      if (!pause()) return;
    }
  }
}

}  // namespace dra::kubeletplugin
