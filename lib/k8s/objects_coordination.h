#pragma once

// coordination.k8s.io/v1 Lease, for leader election.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// All fields are pointers in Go, hence optional here: unset and "" / 0 stay distinct.
struct LeaseSpec {
  std::optional<std::string> holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::optional<std::string> acquire_time;  // MicroTime, "2006-01-02T15:04:05.000000Z"
  std::optional<std::string> renew_time;
  std::optional<int32_t> lease_transitions;
  nlohmann::json unknown_fields;  // preferredHolder, strategy
};

struct Lease {
  static constexpr ResourceInfo kResource{"coordination.k8s.io", "v1", "Lease", "leases", true};
  ObjectMeta metadata;
  LeaseSpec spec;
  nlohmann::json raw;  // the whole object as last decoded; empty for objects built in code

  static absl::StatusOr<Lease> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

}  // namespace dra::k8s
