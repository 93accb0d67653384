#pragma once

// What the daemon's main flow needs from the component that follows its clique: the
// ComputeDomainClique, which the controller writes (ComputeDomainCliques=true, CliqueFollower), or
// the ComputeDomain status, where the daemon keeps its own entry (the legacy path,
// CdStatusRegistrar).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cddaemon {

// Who this daemon is.
struct DaemonIdentity {
  std::string node_name;
  std::string pod_ip;
  std::string pod_name;
  std::string pod_uid;
  std::string clique_id;
  int max_nodes = 0;
};

// Receives the daemons of this daemon's clique after a successful sync (the clique's full list,
// or the same-clique nodes of the ComputeDomain status). A non-OK result is retried like a failed
// write. Runs on the registrar's worker thread, one call at a time.
using DaemonsCallback =
    std::function<absl::Status(const std::vector<k8s::ComputeDomainDaemonInfo>&)>;

class Registrar {
 public:
  virtual ~Registrar() = default;
  virtual void Start() = 0;
  // The pod readiness to publish in the own entry (nothing is published before the first call).
  virtual void SetReady(bool ready) = 0;
  // Stops syncing, then removes the entries carrying this pod's IP, trying until `budget` is
  // spent. Idempotent.
  virtual absl::Status Stop(absl::Duration budget) = 0;
};

}  // namespace dra::cddaemon
