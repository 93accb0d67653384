#pragma once

// The ComputeDomain controller. For every ComputeDomain it
// adds the finalizer, creates the IMEX daemons' DaemonSet and ResourceClaimTemplate in the driver
// namespace and the workload ResourceClaimTemplate in the domain's namespace (render.h), writes
// the domain's ComputeDomainCliques from its daemon pods (clique_sync.h: the controller is their
// only writer; each daemon only labels its own pod), and keeps status.nodes / status.status in
// line with them (status.h). When the domain is deleted it removes those objects and the
// domain's node labels, in order, then its finalizer. Objects and node labels left behind by
// domains that no longer exist are cleaned up at start and every cleanup_interval (node labels also
// on every domain event).
//
// Everything is driven by informer events through one WorkQueue (work_queue.h); each work item
// works on one key (a domain UID, "gc", "node-labels"), so one domain is never
// reconciled twice at once, and a burst of pod events costs one write per clique and one status
// write. Writes carry the resourceVersion read (Update, or a merge patch with
// metadata.resourceVersion), so concurrent writers (a second controller during a leader
// hand-over, a user) never overwrite each other: a Conflict retries with backoff on fresh data.
//
// Thread-safety: Start and Stop from one thread; the rest is internal.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/cdcontroller/config.h"
#include "lib/cdcontroller/status.h"
#include "lib/common/clock.h"
#include "lib/common/work_queue.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_apps.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "lib/metrics/metrics.h"

namespace dra::cdcontroller {

class Controller {
 public:
  // `client` and `registry` (may be null) must outlive the controller.
  static absl::StatusOr<std::unique_ptr<Controller>> Create(k8s::Client* client,
                                                            ControllerConfig config,
                                                            metrics::Registry* registry);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the informers, waits for their first lists (Unavailable after `sync_timeout`), then
  // the work queue and the periodic resync and cleanup.
  absl::Status Start(absl::Duration sync_timeout = absl::Minutes(2));
  // Stops everything; running work items finish first. Safe without or after a failed Start.
  void Stop();

  // For tests: waits until the queue has nothing to do.
  bool WaitIdle(absl::Duration timeout) const { return queue_.WaitIdle(timeout); }

 private:
  Controller(k8s::Client* client, ControllerConfig config, metrics::Registry* registry);

  // Work items (controller.cc).
  void EnqueueDomain(const std::string& uid);
  absl::Status ReconcileDomain(const std::string& uid);
  absl::Status EnsureDaemonObjects(const k8s::ComputeDomain& cd);
  absl::Status EnsureWorkloadClaimTemplate(const k8s::ComputeDomain& cd);
  // Writes the domain's cliques (clique_sync.h; the controller is their only writer) and returns
  // each as the server holds it after this pass.
  absl::StatusOr<std::vector<k8s::ComputeDomainClique>> SyncCliques(const k8s::ComputeDomain& cd)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<k8s::ComputeDomainClique>> SyncClique(
      const k8s::ComputeDomain& cd, const std::string& clique_id,
      const std::vector<DaemonPod>& cached_pods, std::optional<std::vector<DaemonPod>>* live_pods)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The clique as last seen: the informer's copy, or the answer of our own last write when the
  // informer has not caught up with it yet.
  std::shared_ptr<const k8s::ComputeDomainClique> KnownClique(const std::string& key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void RememberClique(const k8s::ComputeDomainClique& written) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetClique(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // The domain's status.nodes as computed from `cliques` (as SyncCliques left them) and the
  // daemon pods.
  std::vector<k8s::ComputeDomainNode> DomainNodes(
      const std::string& uid, const std::vector<k8s::ComputeDomainClique>& cliques) const;
  // `cliques`: the domain's cliques as SyncCliques left them.
  absl::Status SyncStatus(const k8s::ComputeDomain& cd,
                          const std::vector<k8s::ComputeDomainClique>& cliques);
  // Before creating an object: the domain, read live, still exists and is not being deleted (the
  // cache may lag behind a deletion, and an object created then would outlive the domain).
  // Aborted otherwise; the retry then finds the deletion in the cache.
  absl::Status ConfirmLive(const k8s::ComputeDomain& cd);
  std::shared_ptr<const k8s::ComputeDomain> DomainByUid(const std::string& uid) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void RememberWrite(const std::string& replaced_rv, const nlohmann::json& result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Posts a Warning event on the domain for a problem the user must fix (a name clash).
  void ReportToUser(const std::string& uid, const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);
  void RecordStatus(const std::string& uid, const std::string& status) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetStatus(const std::string& uid) ABSL_LOCKS_EXCLUDED(mu_);

  // Binding conditions (binding_sync.cc; binding.h). For every claim allocated with a channel of
  // the domain `uid` that carries binding conditions and is not reported yet: labels the
  // allocated node for the domain (so that its DaemonSet starts a daemon there) and, once the
  // node's daemon is Ready in `nodes`, sets the binding condition True on the claim's
  // status.devices entry; sets the failure condition when the daemon cannot become Ready (`cd`
  // null: the domain does not exist, confirmed live; being deleted; in another namespace). Removes
  // the labels it set on nodes where no such claim is allocated any more.
  absl::Status SyncBindingConditions(const std::string& uid, const k8s::ComputeDomain* cd,
                                     const std::vector<k8s::ComputeDomainNode>& nodes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sets the label resource.nvidia.com/computeDomain=<uid> on `node` unless another domain holds
  // it: true when the node carries `uid`'s label afterwards, false when another domain's.
  absl::StatusOr<bool> LabelNodeFor(const std::string& node, const std::string& uid);
  // Removes the label from `node` if it names `uid`.
  absl::Status UnlabelNodeFor(const std::string& node, const std::string& uid);
  void OnClaimEvent(const k8s::ResourceClaim* before, const k8s::ResourceClaim* after);
  // Queues the domains of all claims still waiting for their binding condition (a node label
  // went away: a waiting claim may now take the node).
  void EnqueueWaitingBindingDomains();

  // Deletion and cleanup (cleanup.cc).
  absl::Status FinalizeDomain(const k8s::ComputeDomain& cd);
  // The domain informer's delete handler. A domain whose last known state carries our finalizer
  // and that FinalizeDomain did not let go has vanished unfinalized: the API server deleted it
  // while our finalizer was being added (a DELETE that read the object before our patch removes
  // it anyway, kubernetes/kubernetes#77988). Its objects are then removed by
  // CleanUpVanishedDomain on the domain's next work item.
  void OnDomainDeleted(const k8s::ComputeDomain& last) ABSL_LOCKS_EXCLUDED(mu_);
  // Deletes the objects of a vanished domain (listed live: our own last creates may not be cached
  // yet) and its node labels, then the objects' finalizers; Unavailable while some remain.
  absl::Status CleanUpVanishedDomain(const std::string& uid, const std::string& domain_namespace)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RemoveNodeLabels(const std::string& uid);
  absl::Status CollectGarbage();
  absl::Status CleanupStaleNodeLabels();
  // UIDs of all ComputeDomains in the cluster, listed live (not from the cache).
  absl::StatusOr<std::set<std::string>> LiveDomainUids();
  std::vector<std::string> DaemonSetNamespaces() const;

  void TimerLoop() ABSL_LOCKS_EXCLUDED(mu_);

  k8s::Client* const client_;
  const ControllerConfig config_;
  metrics::Family<metrics::Gauge>* info_gauge_ = nullptr;
  WorkQueue queue_;

  std::unique_ptr<k8s::Informer<k8s::ComputeDomain>> domains_;
  std::vector<std::unique_ptr<k8s::Informer<k8s::DaemonSet>>> daemonsets_;  // one per namespace
  std::unique_ptr<k8s::Informer<k8s::ResourceClaimTemplate>> daemon_rcts_;
  std::unique_ptr<k8s::Informer<k8s::ResourceClaimTemplate>> workload_rcts_;
  std::unique_ptr<k8s::Informer<k8s::ComputeDomainClique>> cliques_;
  std::unique_ptr<k8s::Informer<k8s::Pod>> pods_;
  std::unique_ptr<k8s::Informer<k8s::Node>> nodes_;
  // ResourceClaims of all namespaces (config_.binding_conditions, driverManaged only).
  std::unique_ptr<k8s::Informer<k8s::ResourceClaim>> claims_;
  std::atomic<bool> logged_without_binding_conditions_{false};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::string> statuses_ ABSL_GUARDED_BY(mu_);  // uid -> status.status
  // Our last write of each domain: (resourceVersion it replaced, the object the server returned).
  // A reconcile that finds the replaced version in the cache (the informer has not caught up
  // yet) works on our result instead, rather than failing with a Conflict.
  std::map<std::string, std::pair<std::string, std::shared_ptr<const k8s::ComputeDomain>>> written_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> reported_ ABSL_GUARDED_BY(mu_);  // uid -> last event text
  // Domains whose finalizer FinalizeDomain is removing (the informer's delete of them is ours).
  std::set<std::string> finalizing_ ABSL_GUARDED_BY(mu_);
  // Domains that vanished with our finalizer (OnDomainDeleted): uid -> the domain's namespace.
  // Kept until their objects are gone.
  std::map<std::string, std::string> vanished_ ABSL_GUARDED_BY(mu_);
  metrics::Counter* vanished_counter_ = nullptr;
  // Cliques by "<namespace>/<name>": our last write of each (dropped when the informer reports
  // the clique deleted), and the index each node held at our last write (kept across a deletion
  // by hand, so the recreated clique gives every node its index back; dropped with the domain).
  std::map<std::string, std::shared_ptr<const k8s::ComputeDomainClique>> clique_written_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::string, int64_t>> clique_indices_ ABSL_GUARDED_BY(mu_);
  // Nodes the controller labelled for a claim with binding conditions, per domain UID (the label
  // goes when no such claim of the domain is allocated on the node any more).
  std::map<std::string, std::set<std::string>> binding_labelled_ ABSL_GUARDED_BY(mu_);
  std::thread timer_;
};

}  // namespace dra::cdcontroller
