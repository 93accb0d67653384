#pragma once

// The daemon's side of the ComputeDomainClique (ComputeDomainCliques=true): it only reads. The
// compute-domain controller is the clique's one writer (docs/compute-domains.md, "At scale"): it
// lists each daemon whose pod carries the clique label (which the daemon sets on its own pod
// before starting this), with the pod's IP and Ready condition and an index it assigns, and
// removes the entry when the pod terminates. This follower watches the one clique (field selector
// on its name) and hands each new list of settled entries that includes this node to the callback
// (a list without this node means the controller has not placed it yet: nothing to configure).
// A failed callback is retried after the jittered backoff of SyncLoop.
//
// Thread-safety: Start, Stop from one thread (main). The callback runs on the worker thread, one
// call at a time.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/cddaemon/sync_loop.h"
#include "lib/common/backoff.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

// Receives the daemons of this daemon's clique after a successful sync (the clique's full list).
// A non-OK result is retried like a failed sync. Runs on the worker thread, one call at a time.
using DaemonsCallback =
    std::function<absl::Status(const std::vector<k8s::ComputeDomainDaemonInfo>&)>;

struct CliqueFollowerOptions {
  std::string namespace_name;  // the driver namespace (the daemon pod's namespace)
  std::string compute_domain_uid;
  std::string clique_id;
  std::string node_name;
  BackoffOptions backoff = kWriteBackoff;
  absl::Duration resync = absl::Minutes(4);  // informer resync (upstream issue #742)
};

class CliqueFollower final {
 public:
  CliqueFollower(k8s::Client* client, CliqueFollowerOptions options, DaemonsCallback callback);
  ~CliqueFollower();
  CliqueFollower(const CliqueFollower&) = delete;
  CliqueFollower& operator=(const CliqueFollower&) = delete;

  void Start();
  // Stops the worker and the informer. The entry stays: the controller removes it when the pod
  // terminates, and a daemon restarted in the same pod keeps its index. Idempotent.
  absl::Status Stop(absl::Duration budget);

  // Callbacks run so far with a list that included this node (for tests and logs).
  int syncs() const { return loop_.syncs(); }

 private:
  absl::Status SyncOnce(bool reread);

  const CliqueFollowerOptions options_;
  const std::string name_;
  DaemonsCallback callback_;
  k8s::Informer<k8s::ComputeDomainClique> informer_;
  SyncLoop loop_;
  bool stopped_ = false;
  // Worker thread only: the list last handed to the callback.
  std::optional<std::vector<k8s::ComputeDomainDaemonInfo>> last_;
};

}  // namespace dra::cddaemon
