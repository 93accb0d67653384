#pragma once

// Posting core/v1 Events, the way operators see component problems in `kubectl describe` and
// `kubectl get events`.

#include <string>

#include "absl/status/status.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_core.h"

namespace dra::k8s {

struct EventTarget {
  std::string api_version = "v1";
  std::string kind;            // "Node", "Pod", "ResourceClaim"
  std::string namespace_name;  // "" for cluster-scoped objects (the event then goes to "default")
  std::string name;
  std::string uid;
};

// Creates an Event about `target`. `type` is "Normal" or "Warning"; `reason` is UpperCamelCase.
absl::Status PostEvent(Client* client, const EventTarget& target, const std::string& type,
                       const std::string& reason, const std::string& message,
                       const std::string& component, const std::string& host = "");

}  // namespace dra::k8s
