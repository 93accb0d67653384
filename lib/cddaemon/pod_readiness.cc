#include "lib/cddaemon/pod_readiness.h"

#include "absl/strings/str_cat.h"
#include "lib/common/json_access.h"

namespace dra::cddaemon {

bool PodIsReady(const nlohmann::json& pod) {
  const nlohmann::json* status =
      pod.is_object() && pod.contains("status") ? &pod["status"] : nullptr;
  if (status == nullptr || !status->is_object()) return false;
  auto phase = status->find("phase");
  if (phase == status->end() || *phase != "Running") return false;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return false;
  for (const nlohmann::json& c : *conditions) {
    if (json_access::StringOr(c, "type") == "Ready") {
      return json_access::StringOr(c, "status") == "True";
    }
  }
  return false;
}

namespace {
k8s::ListOptions NameSelector(const std::string& name) {
  k8s::ListOptions o;
  o.field_selector = absl::StrCat("metadata.name=", name);
  return o;
}
}  // namespace

PodReadinessWatcher::PodReadinessWatcher(k8s::Client* client, const std::string& namespace_name,
                                         const std::string& pod_name, absl::Duration resync,
                                         const std::function<void(bool ready)>& on_ready)
    : informer_(client, namespace_name, NameSelector(pod_name), resync) {
  informer_.AddHandlers(
      {.on_add = [on_ready](const auto& pod) { on_ready(PodIsReady(pod->raw)); },
       .on_update = [on_ready](const auto&, const auto& pod) { on_ready(PodIsReady(pod->raw)); },
       .on_delete = [on_ready](const auto&) { on_ready(false); }});
}

}  // namespace dra::cddaemon
