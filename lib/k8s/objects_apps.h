#pragma once

// apps/v1 DaemonSet: metadata and rollout status typed; spec kept as raw JSON (the driver only
// creates DaemonSets from manifests and watches their rollout).

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

struct DaemonSetStatus {
  int32_t desired_number_scheduled = 0;
  int32_t current_number_scheduled = 0;
  int32_t number_ready = 0;
  int32_t updated_number_scheduled = 0;
  int32_t number_available = 0;
  int32_t number_unavailable = 0;
  int64_t observed_generation = 0;  // the rollout is current when >= metadata.generation
  nlohmann::json unknown_fields;    // conditions, collisionCount, numberMisscheduled
};

struct DaemonSet {
  static constexpr ResourceInfo kResource{"apps", "v1", "DaemonSet", "daemonsets", true};
  ObjectMeta metadata;
  nlohmann::json spec;  // DaemonSetSpec as raw JSON; null when unset
  DaemonSetStatus status;
  nlohmann::json raw;  // the whole object as last decoded; empty for objects built in code

  static absl::StatusOr<DaemonSet> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

}  // namespace dra::k8s
