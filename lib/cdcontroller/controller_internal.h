#pragma once

// Pieces shared by the Controller's source files (controller.cc, controller_start.cc,
// cleanup.cc, app.cc, uninstall.cc); not part of the library's interface.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/k8s/client.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::cdcontroller::internal {

// Informer index names: the label resource.nvidia.com/computeDomain, and a ComputeDomain's UID.
inline constexpr char kIndexByDomain[] = "cd";
inline constexpr char kIndexByUid[] = "uid";

inline std::string DomainLabel(const k8s::ObjectMeta& meta) {
  auto it = meta.labels.find(std::string(k8s::kComputeDomainLabel));
  return it == meta.labels.end() ? "" : it->second;
}

// The API client options of the controller's processes (the controller and its cleanup
// subcommand): the given rate limits, field manager "compute-domain-controller".
inline k8s::ClientOptions ClientOptionsFor(double qps, int burst) {
  k8s::ClientOptions options;
  options.qps = qps;
  options.burst = burst;
  options.field_manager = "compute-domain-controller";
  return options;
}

template <typename T>
std::vector<std::string> DomainLabelIndex(const T& obj) {
  std::string v = DomainLabel(obj.metadata);
  if (v.empty()) return {};
  return {v};
}

// Removes the node label resource.nvidia.com/computeDomain=<uid> from every node that has it
// (an Update with the listed resourceVersion: a label set meanwhile for another domain makes it a
// Conflict instead of being removed).
absl::Status RemoveNodeLabels(k8s::Client* client, const std::string& uid);

// Removes what the driver made for the domain `uid` (cleanup.cc): its workload
// ResourceClaimTemplate in `domain_namespace`; in each of `daemon_namespaces` its IMEX daemons'
// ResourceClaimTemplate, DaemonSet and ComputeDomainCliques; its node labels (unless
// `daemon_namespaces` is empty: hostManaged); then the finalizer resource.nvidia.com/computeDomain
// of those objects. All found by the label resource.nvidia.com/computeDomain=<uid>, listed live.
// OK once every such object is gone; Unavailable while some remain (call again). The domain
// itself and its finalizer are the caller's.
absl::Status RemoveDomainObjects(k8s::Client* client, const std::string& uid,
                                 const std::string& domain_namespace,
                                 const std::vector<std::string>& daemon_namespaces);

}  // namespace dra::cdcontroller::internal
