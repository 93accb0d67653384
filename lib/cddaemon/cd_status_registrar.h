#pragma once

// The legacy registration path (ComputeDomainCliques=false; spec "ComputeDomainStatusManager"):
// the daemon keeps its entry in ComputeDomain.status.nodes of its own ComputeDomain (in the CD's
// namespace, found by name; its UID must match), with the write discipline of SyncLoop.
// With IMEXDaemonsWithDNSNames off, the daemon list is handed on only once status.nodes has
// spec.numNodes entries (IMEX then starts with the full IP list).
//
// Thread-safety: Start, Stop from one thread (main); SetReady from any thread. The callback runs
// on the worker thread, one call at a time.

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lib/cddaemon/registrar.h"
#include "lib/cddaemon/sync_loop.h"
#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"

namespace dra::cddaemon {

struct CdStatusRegistrarOptions {
  std::string cd_namespace;
  std::string cd_name;
  std::string cd_uid;
  DaemonIdentity me;
  bool dns_names = true;  // IMEXDaemonsWithDNSNames
  BackoffOptions backoff = kWriteBackoff;
  absl::Duration resync = absl::Minutes(4);
};

class CdStatusRegistrar final : public Registrar {
 public:
  CdStatusRegistrar(k8s::Client* client, CdStatusRegistrarOptions options,
                    DaemonsCallback callback);
  ~CdStatusRegistrar() override;

  void Start() override;
  void SetReady(bool ready) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Stop(absl::Duration budget) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status SyncOnce(bool reread) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<k8s::ComputeDomain> ReadLatest();
  absl::Status CheckUid(const k8s::ComputeDomain& cd) const;
  absl::Status RemoveOwnEntry(absl::Duration budget);

  k8s::Client* const client_;
  const CdStatusRegistrarOptions options_;
  const std::string what_;
  DaemonsCallback callback_;
  k8s::Informer<k8s::ComputeDomain> informer_;
  SyncLoop loop_;
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> ready_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra::cddaemon
