#pragma once

// `compute-domain-controller cleanup`: the Helm chart's pre-delete hook (docs/helm.md,
// "Uninstall"). The ComputeDomains are the users'; what the driver made for them is its own (the
// finalizer resource.nvidia.com/computeDomain, each domain's IMEX DaemonSet, ResourceClaimTemplates
// and cliques, the node labels). Without this step the domains would keep a finalizer that nobody
// removes once the controller is gone, and their namespaces would hang in Terminating.
//
// By default (ReleaseAllComputeDomains) the driver lets go of every domain and leaves the domain
// objects: the controller is stopped first (else it would put back what is removed), then the
// driver's objects and finalizers go. A driver installed again adopts the domains. With
// --delete-compute-domains (the chart's controller.uninstallCleanup.deleteComputeDomains)
// DeleteAllComputeDomains deletes every domain instead and waits while the controller, still
// running (Helm runs pre-delete hooks before it deletes any object of the release), finalizes them.
// Both then wait until the IMEX daemon pods are gone (WaitForDaemonPodsGone), so that the kubelet
// plugins, still running too, unprepare the daemons' claims and remove their files.

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
  // Delete every ComputeDomain (DeleteAllComputeDomains) rather than release them.
  bool delete_compute_domains = false;
  // The controller's Deployment in driver_namespace, which ReleaseAllComputeDomains scales to 0
  // replicas and whose pods it waits for to be gone before it touches a domain. Empty: nothing is
  // stopped (no controller runs).
  std::string controller_deployment;
};

// Deletes every ComputeDomain that is not being deleted yet and waits until none is left. Logs a
// progress line for every deletion and whenever the set of remaining domains changes. Returns OK
// when none is left (also when there were none, or when the ComputeDomain CRD is not installed);
// DeadlineExceeded after `timeout`, naming each domain left with its finalizers and what to do;
// Cancelled when `stopped` said so; the API error (with what was being done) otherwise.
absl::Status DeleteAllComputeDomains(k8s::Client* client, const CleanupOptions& options);

// Lets go of every ComputeDomain and leaves the domain objects: stops the controller (above), then,
// for each domain, removes its objects (internal::RemoveDomainObjects, with its daemon objects in
// driver_namespace) and then the finalizer resource.nvidia.com/computeDomain from the domain (a
// merge patch with its resourceVersion: a change meanwhile is a Conflict, retried). Other
// finalizers, the spec and the status stay. Repeats every poll_interval until every domain is
// released. Returns OK then (also when there is none, or no ComputeDomain CRD);
// DeadlineExceeded after `timeout` naming what is left and why; Cancelled when `stopped` said so;
// the API error (with what was being done) otherwise.
absl::Status ReleaseAllComputeDomains(k8s::Client* client, const CleanupOptions& options);

// Waits until no pod labelled resource.nvidia.com/computeDomain (an IMEX daemon) is left in
// driver_namespace, within `timeout` from `start`: DeadlineExceeded names the pods left.
absl::Status WaitForDaemonPodsGone(k8s::Client* client, const CleanupOptions& options,
                                   absl::Time start);

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
