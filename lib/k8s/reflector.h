#pragma once

// The list+watch loop behind an informer: lists (all pages), then watches from the list's
// resourceVersion, advancing the resume point on every event and bookmark. A dropped connection
// or an API server restart re-watches from the last resourceVersion after a backoff, and so does
// a watch that received nothing, not even a bookmark, for ClientOptions::watch_idle_timeout (a
// connection that died without a close); 410 Gone
// (history compacted) relists, and the consumer diffs the new list against its cache, so the
// cache neither loses nor duplicates an object.
//
// An object that cannot be read whole (UndecodableObject: nested deeper than the client reads,
// which the API server accepts) never stops the loop: a list passes on the others, a watch event
// carries its identity only (WatchEvent::undecodable), the resume point moves past it, and the
// object is reported once (ReportUndecodable: a warning and
// nvidia_dra_undecodable_objects_total).
//
// Thread-safety: Run() blocks on the calling thread; Stop() may be called from any thread.

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/k8s/client.h"

namespace dra::k8s {

class Reflector {
 public:
  struct Sink {
    // A full, fresh list of the collection.
    std::function<void(std::vector<nlohmann::json>&& items)> replace;
    // One watch event (never a bookmark); WatchEvent::undecodable is set when only the object's
    // identity could be read.
    std::function<void(WatchEvent&& event)> event;
    // Optional: called instead of `replace` with the objects of the list that cannot be read
    // whole, too (they are in none of `items`).
    std::function<void(std::vector<nlohmann::json>&& items,
                       std::vector<UndecodableObject>&& undecodable)>
        replace_all;
  };

  Reflector(Client* client, const ResourceInfo& resource, std::string ns, ListOptions selectors,
            Sink sink);

  // Lists and watches until Stop(). Errors are logged and retried with backoff.
  void Run();
  void Stop();
  bool stopped() const { return stop_.HasBeenNotified(); }

  // Counters for tests and metrics.
  int lists() const { return lists_.load(); }
  int watches() const { return watches_.load(); }
  // Watches ended because nothing arrived for ClientOptions::watch_idle_timeout.
  int idle_timeouts() const { return idle_timeouts_.load(); }

 private:
  // Sleeps `d` unless stopped first; returns false when stopped.
  bool Pause(absl::Duration d);

  Client* const client_;
  const ResourceInfo resource_;
  const std::string ns_;
  const ListOptions selectors_;
  const Sink sink_;
  absl::Notification stop_;
  std::atomic<int> lists_{0};
  std::atomic<int> watches_{0};
  std::atomic<int> idle_timeouts_{0};
};

}  // namespace dra::k8s
