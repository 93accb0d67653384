#pragma once

// What the plugin reads and writes in the API server for ComputeDomains, behind an interface so
// that the prepare logic is unit-tested without a cluster:
//   - ComputeDomains, from an informer cache over all namespaces (by UID);
//   - this node's label resource.nvidia.com/computeDomain=<cdUID> (the daemon DaemonSet's node
//     selector);
//   - this node's daemon readiness, from the ComputeDomainClique <driver ns>/<cdUID>.<cliqueID>
//     (a live GET: the plugin never caches cliques), falling back to the ComputeDomain's
//     status.nodes when the clique cannot be read (it does not exist yet, or the domain predates
//     cliques);
//   - ResourceClaims by name, for the checkpoint cleanup.
//
// Thread-safety: every method may be called from any thread.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cdplugin {

class DomainApi {
 public:
  virtual ~DomainApi() = default;

  // The ComputeDomain with this UID as the cache has it; null when unknown.
  virtual std::shared_ptr<const k8s::ComputeDomain> FindDomain(const std::string& uid) const = 0;
  // Sets the node label to `cd_uid`. A label of another domain is a retryable error (one domain
  // per node; it clears when that domain's channel claim is unprepared). Idempotent.
  virtual absl::Status AddNodeLabel(const std::string& cd_uid) = 0;
  // Removes the node label if it is `cd_uid`; leaves another domain's label alone. Idempotent.
  virtual absl::Status RemoveNodeLabel(const std::string& cd_uid) = 0;
  // Whether this node's daemon of `cd_uid` is Ready (see above). `domain` is the cached domain.
  virtual absl::StatusOr<bool> DaemonReady(const k8s::ComputeDomain& domain,
                                           const std::string& clique_id) = 0;
  // The UID of the ResourceClaim ns/name; nullopt when it does not exist.
  virtual absl::StatusOr<std::optional<std::string>> ClaimUid(const std::string& ns,
                                                              const std::string& name) = 0;
};

// The real one. `client` must outlive it.
class KubeDomainApi : public DomainApi {
 public:
  KubeDomainApi(k8s::Client* client, std::string node_name, std::string driver_namespace,
                absl::Duration resync = absl::Minutes(10));
  ~KubeDomainApi() override;

  // Starts the ComputeDomain informer and waits up to `timeout` for its first list.
  absl::Status Start(absl::Duration timeout);
  void Stop();
  bool synced() const { return informer_.HasSynced(); }

  std::shared_ptr<const k8s::ComputeDomain> FindDomain(const std::string& uid) const override;
  absl::Status AddNodeLabel(const std::string& cd_uid) override;
  absl::Status RemoveNodeLabel(const std::string& cd_uid) override;
  absl::StatusOr<bool> DaemonReady(const k8s::ComputeDomain& domain,
                                   const std::string& clique_id) override;
  absl::StatusOr<std::optional<std::string>> ClaimUid(const std::string& ns,
                                                      const std::string& name) override;

  // Sets (non-empty value) or removes (empty) a label of this node with a merge patch.
  absl::Status PatchNodeLabel(const std::string& key, const std::string& value);

 private:
  k8s::Client* const client_;
  const std::string node_name_;
  const std::string driver_namespace_;
  k8s::Informer<k8s::ComputeDomain> informer_;
};

}  // namespace dra::cdplugin
