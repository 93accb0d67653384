#pragma once

// `compute-domain-controller cleanup`: the Helm chart's pre-delete hook (docs/helm.md,
// "Uninstall"). It deletes every ComputeDomain of the cluster and waits until the controller has
// finalized each of them (deleted its IMEX DaemonSet and ResourceClaimTemplates, removed its node
// labels and the finalizer resource.nvidia.com/computeDomain). Helm runs pre-delete hooks before
// it deletes any object of the release, so the controller still runs; without this step the
// ComputeDomains would keep a finalizer that nobody removes once the controller is gone, and
// their namespaces would hang in Terminating.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/k8s/client.h"

namespace dra {
class Flags;
class SignalHandler;
}  // namespace dra

namespace dra::cdcontroller {

struct CleanupOptions {
  // How long to wait for the controller to finalize the deleted ComputeDomains.
  absl::Duration timeout = absl::Minutes(4);
  // How often the ComputeDomains are listed again while waiting.
  absl::Duration poll_interval = absl::Seconds(2);
  // The driver's namespace (where the controller runs), named in the timeout error.
  std::string driver_namespace;
  // Returns true when the wait should end early (a shutdown signal): Cancelled.
  std::function<bool()> stopped;
  // Tests only: only the ComputeDomains of this namespace (empty: every namespace).
  std::string only_namespace;
};

// Deletes every ComputeDomain that is not being deleted yet and waits until none is left. Logs a
// progress line for every deletion and whenever the set of remaining domains changes. Returns OK
// when none is left (also when there were none, or when the ComputeDomain CRD is not installed);
// DeadlineExceeded after `timeout`, naming each domain left with its finalizers and what to do;
// Cancelled when `stopped` said so; the API error (with what was being done) otherwise.
absl::Status DeleteAllComputeDomains(k8s::Client* client, const CleanupOptions& options);

// The cleanup command's flags and its run (in the process of `compute-domain-controller cleanup`).
struct CleanupProcessOptions {
  CleanupOptions cleanup;
  std::string kubeconfig;
  double kube_api_qps = 5;
  int kube_api_burst = 10;
};
void AddCleanupFlags(Flags& flags, CleanupProcessOptions* options);
absl::Status RunCleanup(CleanupProcessOptions options, SignalHandler* signals);

}  // namespace dra::cdcontroller
