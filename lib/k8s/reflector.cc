#include "lib/k8s/reflector.h"

#include <algorithm>

#include "lib/common/backoff.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/http.h"
#include "lib/k8s/wire_decode.h"

namespace dra::k8s {
namespace {

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(200);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
// Servers end watches after this; a short period keeps stale connections from lingering.
constexpr int64_t kWatchTimeoutSeconds = 240;

// The resume point an event carries; "" when it has none or the wrong type (the event's object
// is then skipped by the typed decoder, with a warning naming it).
std::string ResourceVersionOf(const nlohmann::json& object) {
  return json_access::StringOr(json_access::MemberOrNull(object, "metadata"), "resourceVersion");
}

}  // namespace

Reflector::Reflector(Client* client, const ResourceInfo& resource, std::string ns,
                     ListOptions selectors, Sink sink)
    : client_(client),
      resource_(resource),
      ns_(std::move(ns)),
      selectors_(std::move(selectors)),
      sink_(std::move(sink)) {}

void Reflector::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

bool Reflector::Pause(absl::Duration d) { return !stop_.WaitForNotificationWithTimeout(d); }

void Reflector::Run() {
  Backoff backoff({.initial = kInitialBackoff, .max = kMaxBackoff, .jitter = 0.5});
  std::string rv;
  bool need_list = true;
  while (!stopped()) {
    if (need_list) {
      ListOptions opts = selectors_;
      opts.limit = 500;
      absl::StatusOr<ListPage> page = client_->ListAllOf(resource_, ns_, opts);
      if (!page.ok()) {
        DRA_WARNING("list failed; retrying", "resource", resource_.plural, "err", page.status());
        if (!Pause(backoff.Next())) return;
        continue;
      }
      ++lists_;
      rv = std::move(page->resource_version);
      for (const UndecodableObject& u : page->undecodable) ReportUndecodable(resource_, u);
      if (sink_.replace_all) {
        sink_.replace_all(std::move(page->items), std::move(page->undecodable));
      } else {
        sink_.replace(std::move(page->items));
      }
      need_list = false;
      backoff.Reset();
    }
    ++watches_;
    WatchOptions wo{.label_selector = selectors_.label_selector,
                    .field_selector = selectors_.field_selector,
                    .resource_version = rv,
                    .allow_bookmarks = true,
                    .timeout_seconds = kWatchTimeoutSeconds};
    bool got_event = false;
    absl::Time watch_start = absl::Now();
    absl::Status s = client_->Watch(
        resource_, ns_, wo,
        [&](WatchEvent&& e) {
          got_event = true;
          std::string event_rv = ResourceVersionOf(e.object);
          // Passed on all the same: a deletion applies by identity, and the sink decides what a
          // skipped change means for its cache. A deletion is not a skip: not reported.
          if (e.undecodable && e.type != WatchEvent::Type::kDeleted) {
            ReportUndecodable(resource_, *e.undecodable);
          }
          if (e.type != WatchEvent::Type::kBookmark) sink_.event(std::move(e));
          if (!event_rv.empty()) rv = event_rv;
          return !stopped();
        },
        [this] { return stopped(); });
    if (stopped()) return;
    if (IsGone(s)) {
      DRA_VLOG(2, "watch history expired; relisting", "resource", resource_.plural, "rv", rv);
      need_list = true;
      continue;
    }
    if (!s.ok()) {
      if (IsIdleTimeout(s)) ++idle_timeouts_;  // Client::Watch logged it as a warning
      DRA_VLOG(1, "watch ended with error; resuming", "resource", resource_.plural, "rv", rv, "err",
               s);
      if (!Pause(backoff.Next())) return;
      continue;
    }
    if (got_event) {
      backoff.Reset();
    } else if (absl::Now() - watch_start < absl::Seconds(1)) {
      // A server that ends every watch at once must not be hammered.
      if (!Pause(backoff.Next())) return;
    }
  }
}

}  // namespace dra::k8s
