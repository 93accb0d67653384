#pragma once

// ClaimCache: the ResourceClaims allocated to this node's devices, kept by a list+watch, so that
// NodePrepareResources reads its claims from memory instead of one GET each (ClaimLookup,
// claim_source.h; docs/performance.md "Claim cache").
//
// What is kept: the API server cannot filter ResourceClaims by allocation (their only field
// selectors are metadata.name and metadata.namespace, and claims carry no node label), so every
// claim is watched, but only those with an allocation result of `driver_name` from pool
// `node_name` and a non-empty status.reservedFor (the kubelet prepares only reserved claims) are
// decoded and kept; the others are dropped from their raw JSON. The initial list and every relist
// go in pages (Options::page_size), each filtered before the next is read, so memory follows the
// claims of this node, not the cluster's.
//
// Exactness: Find answers only with a copy whose UID equals the request's and whose allocation is
// present; anything else is a miss (no copy) or stale (another UID, or not allocated) and the
// caller GETs. After Unprepared(ref) the copy is dropped and the same resourceVersion is never
// taken again: a claim deallocated and allocated anew (same UID) is answered only once its newer
// version arrived, and a GET serves it until then. Each answer is counted (Counts, and the
// on_lookup callback for a metric).
//
// A claim that cannot be read whole (k8s::UndecodableObject: nested deeper than the client reads,
// which the API server accepts, e.g. in opaque parameters) or does not decode is never kept: a
// list goes on with the other claims, a watch goes on past its event, and a version of a kept
// claim that cannot be read drops the copy, so that prepare GETs it and fails for that claim
// alone, naming it. Each such version is reported once (k8s::ReportUndecodable: a warning and
// nvidia_dra_undecodable_objects_total{resource="resourceclaims.resource.k8s.io"}).
//
// Thread-safety: every method may be called from any thread; Start once.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/k8s/client.h"
#include "lib/kubeletplugin/claim_source.h"

namespace dra::kubeletplugin {

class ClaimCache final : public ClaimLookup {
 public:
  enum class Result { kHit, kMiss, kStale };
  static const char* ResultName(Result r);  // "hit" / "miss" / "stale"

  struct Options {
    std::string driver_name;
    std::string node_name;  // the pool of this node's devices
    int64_t page_size = 500;
    std::function<void(Result)> on_lookup;  // called by Find, e.g. to count a metric
  };
  struct Counts {
    int64_t hits = 0;
    int64_t misses = 0;
    int64_t stale = 0;
  };

  explicit ClaimCache(Options options) : options_(std::move(options)) {}
  ~ClaimCache() override { Stop(); }
  ClaimCache(const ClaimCache&) = delete;
  ClaimCache& operator=(const ClaimCache&) = delete;

  // Lists and watches all ResourceClaims through `client` (which must outlive this object) on a
  // thread of its own until Stop. Errors are logged and retried with backoff; Find misses until
  // the first list is in.
  void Start(k8s::Client* client);
  void Stop();
  bool WaitForSync(absl::Duration timeout) const {
    return synced_.WaitForNotificationWithTimeout(timeout);
  }

  std::shared_ptr<const k8s::ResourceClaim> Find(const ClaimRef& ref) override;
  void Unprepared(const ClaimRef& ref) override;

  // The store as the watch thread feeds it (public for tests). A relist: BeginRelist, AddPage for
  // each page, EndRelist (which replaces the copies). Apply: one watch event.
  void BeginRelist();
  void AddPage(const nlohmann::json& items);
  void EndRelist();
  void Apply(const k8s::WatchEvent& event);

  // Whether `claim` (raw JSON) is one this node keeps: reserved, with a result of this driver
  // from this node's pool.
  bool Relevant(const nlohmann::json& claim) const;
  size_t size() const;
  Counts counts() const;

 private:
  using Ptr = std::shared_ptr<const k8s::ResourceClaim>;
  void Run(k8s::Client* client);
  // Decodes and stores `claim` when relevant, else drops its key. REQUIRES: mu_.
  void PutLocked(std::map<std::string, Ptr>& into, const nlohmann::json& claim)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Ptr> items_ ABSL_GUARDED_BY(mu_);    // "namespace/name"
  std::map<std::string, Ptr> pending_ ABSL_GUARDED_BY(mu_);  // a relist in progress
  // Key -> resourceVersion of the copy dropped by Unprepared; that version is not taken again.
  std::map<std::string, std::string> unprepared_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  absl::Notification synced_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace dra::kubeletplugin
