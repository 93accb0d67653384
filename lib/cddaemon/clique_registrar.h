#pragma once

// The daemon's side of the ComputeDomainClique (spec "Registration into the clique"): it creates
// the clique when missing, keeps its own entry (index, pod IP, Ready/NotReady) and the owner
// reference to its pod, hands every observed daemon list to a callback, and removes its entry at
// shutdown.
//
// Writes carry no resourceVersion, so concurrent daemons do not lose to each other: a missing
// clique is created with only the own entry (a daemon that loses that race reads the clique and
// appends), the own entry is appended or replaced by JSON patches guarded by "test" operations on
// its position (clique_entry.h), and an index that two daemons appended at once is resolved in list
// order (k8s::ResolvedIndices). Only settled entries reach the callback. A failed write (a failed
// "test", transport, index exhaustion, a clique of another domain) re-reads the latest object
// after the jittered backoff of SyncLoop.
//
// Thread-safety: Start, Stop from one thread (main); SetReady from any thread. The callback runs
// on the worker thread, one call at a time.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/cddaemon/clique_entry.h"
#include "lib/cddaemon/registrar.h"
#include "lib/cddaemon/sync_loop.h"
#include "lib/common/backoff.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

struct CliqueRegistrarOptions {
  std::string namespace_name;  // the driver namespace (the daemon pod's namespace)
  std::string compute_domain_uid;
  DaemonIdentity me;
  BackoffOptions backoff = kWriteBackoff;
  absl::Duration resync = absl::Minutes(4);  // informer resync (upstream issue #742)
};

class CliqueRegistrar final : public Registrar {
 public:
  CliqueRegistrar(k8s::Client* client, CliqueRegistrarOptions options, DaemonsCallback callback);
  ~CliqueRegistrar() override;
  CliqueRegistrar(const CliqueRegistrar&) = delete;
  CliqueRegistrar& operator=(const CliqueRegistrar&) = delete;

  void Start() override;
  // The pod readiness to publish in the own entry (nothing is published before the first call).
  void SetReady(bool ready) override ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the worker and the informer, then removes the entries carrying this pod's IP, trying
  // until `budget` is spent. Idempotent.
  absl::Status Stop(absl::Duration budget) override ABSL_LOCKS_EXCLUDED(mu_);

  // Successful syncs so far (for tests and logs).
  int syncs() const { return loop_.syncs(); }

 private:
  // One pass: read, create or edit, write, callback.
  absl::Status SyncOnce(bool reread) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<k8s::ComputeDomainClique> ReadLatest();
  // The clique as this daemon knows it: the informer's copy (or the answer of the own last write
  // when newer), or a GET when `reread` or before the informer synced. nullopt: it does not exist.
  absl::StatusOr<std::optional<k8s::ComputeDomainClique>> View(bool reread);
  absl::Status RemoveOwnEntry(absl::Duration budget);

  k8s::Client* const client_;
  const CliqueRegistrarOptions options_;
  const std::string name_;
  DaemonsCallback callback_;
  k8s::Informer<k8s::ComputeDomainClique> informer_;

  SyncLoop loop_;
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> ready_ ABSL_GUARDED_BY(mu_);
  // Patches per sync: an append, then a move off an index appended by an earlier entry too.
  static constexpr int kPatchPasses = 3;
  // Worker thread only: the index last held (asked for again when the clique was recreated).
  int64_t settled_index_ = -1;
  // Worker thread only: the clique as our last write left it.
  std::optional<k8s::ComputeDomainClique> last_answer_;
};

}  // namespace dra::cddaemon
