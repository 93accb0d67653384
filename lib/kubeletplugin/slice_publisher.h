#pragma once

// SlicePublisher: keeps the ResourceSlices of one driver on one node equal to what the driver
// wants published, with the generation, naming, ownership and deletion rules of the upstream
// kubeletplugin helper (docs/api-facts.md "ResourceSlice publishing"):
//
//  * each desired Slice becomes exactly one ResourceSlice named "<hex index>-<driver>-<node>-…"
//    (generateName), owned by the Node (controller=true), spec.nodeName = the node;
//  * obsolete slices (older generation, unparsable or duplicate index) are deleted first, with
//    uid+resourceVersion preconditions;
//  * the pool generation is kept when at most one slice changes and none is added, else bumped
//    (and every slice rewritten); a driver-given higher generation wins;
//  * a pool no longer desired has its slices deleted.
//
// Unlike the Go helper, each sync reads the current slices with a fresh LIST (field selector
// spec.driver + spec.nodeName) instead of a cache plus mutation cache: the reads are rare and
// small, and a fresh read can never act on a stale view. A watch only triggers syncs, so slices
// wiped by the kubelet (or anyone) are republished after `resync_delay`. The watch starts with the
// publisher, so a change made before its first list answered has no event: once that list is in,
// every desired pool is synced once more.
//
// Thread-safety: Update/Stop/WaitForSync may be called from any thread; syncs run on one
// internal worker thread.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_resource.h"

namespace dra::kubeletplugin {

struct SliceContent {
  std::vector<k8s::Device> devices;
  std::vector<k8s::CounterSet> shared_counters;
  std::optional<bool> per_device_node_selection;
};

struct Pool {
  // Driver-requested minimum generation; 0 lets the publisher manage it.
  int64_t generation = 0;
  // Publish at least one (possibly empty) slice per pool: "empty pool" differs from "no pool".
  std::vector<SliceContent> slices;
};

struct DriverResources {
  std::map<std::string, Pool> pools;  // key: pool name
};

class SlicePublisher {
 public:
  struct Options {
    std::string driver;
    std::string node_name;
    std::string node_uid;                            // looked up with a Node GET when empty
    absl::Duration resync_delay = absl::Seconds(1);  // after a watch event on our slices
    absl::Duration max_retry_delay = absl::Seconds(60);
  };

  static absl::StatusOr<std::unique_ptr<SlicePublisher>> Create(k8s::Client* client,
                                                                Options options);
  ~SlicePublisher();

  // Replaces the desired state and syncs every affected pool (old and new) at once.
  void Update(DriverResources resources);
  // Blocks until no sync is pending or running and the last sync of every pool succeeded, or
  // the timeout passes. Returns the last sync error when not in sync.
  absl::Status WaitForSync(absl::Duration timeout);
  void Stop();

  // Count of create/update/delete calls made (for tests and metrics).
  int writes() const;

 private:
  SlicePublisher(k8s::Client* client, Options options);
  void Run();
  void Enqueue(const std::string& pool, absl::Duration delay);
  absl::Status SyncPool(const std::string& pool);
  bool WakeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || queued_; }

  k8s::Client* const client_;
  const Options options_;
  k8s::Informer<k8s::ResourceSlice> informer_;

  mutable absl::Mutex mu_;
  DriverResources desired_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> queue_ ABSL_GUARDED_BY(mu_);  // pool -> due time
  std::map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);      // pool -> consecutive
  // Pools changed by Update() (or failed) and not yet synced since; WaitForSync waits for these
  // only, not for watch-triggered resyncs.
  std::set<std::string> unsynced_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Set when queue_ gets an entry or an earlier due time: wakes the worker at once (it would
  // otherwise sleep out its wait, up to 100 ms, before publishing the first slices).
  bool queued_ ABSL_GUARDED_BY(mu_) = false;
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
  // Pools whose sync the worker has begun at least once (only the worker thread touches it).
  std::set<std::string> tried_;
  // The informer's first list was in when the worker last looked (only the worker touches it).
  bool informer_synced_ = false;
  std::thread worker_;
};

// The slice-name prefix length for a pool of `slice_count` slices: max(5, hex digits of n-1).
int SliceIndexWidth(size_t slice_count);
// Parses "<hex index>-..." with exactly `width` hex digits; nullopt when it does not match.
std::optional<size_t> ParseSliceIndex(const std::string& name, int width);

}  // namespace dra::kubeletplugin
