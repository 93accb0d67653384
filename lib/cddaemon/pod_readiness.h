#pragma once

// Pod readiness feedback (spec "Pod readiness feedback"): an informer on the daemon's own pod
// reports whether it is Ready (phase Running and condition Ready=True), which the kubelet decides
// from the `check` readiness probe; the registrar publishes it in the clique entry.

#include <functional>
#include <string>

#include "lib/k8s/client.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_core.h"
#include "nlohmann/json.hpp"

namespace dra::cddaemon {

// phase == Running and a condition {type: Ready, status: "True"}; reads the raw object, so it
// also works on JSON straight from the API server.
bool PodIsReady(const nlohmann::json& pod);

// Thread-safety: Start/Stop from one thread; `on_ready` runs on the informer thread.
class PodReadinessWatcher {
 public:
  PodReadinessWatcher(k8s::Client* client, const std::string& namespace_name,
                      const std::string& pod_name, absl::Duration resync,
                      const std::function<void(bool ready)>& on_ready);
  void Start() { informer_.Start(); }
  void Stop() { informer_.Stop(); }

 private:
  k8s::Informer<k8s::Pod> informer_;
};

}  // namespace dra::cddaemon
