#pragma once

// Pieces shared by the Controller's source files (controller.cc, controller_start.cc,
// cleanup.cc, app.cc, uninstall.cc); not part of the library's interface.

#include <string>
#include <vector>

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

}  // namespace dra::cdcontroller::internal
