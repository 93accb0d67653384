#pragma once

// resource.nvidia.com/v1beta1 ComputeDomain and ComputeDomainClique (docs/compute-domains.md,
// schema in the chart's crds/). Shared by the controller, the daemon and the kubelet plugin.
//
// `index` is always written (Go has no omitempty on it, so index 0 must serialize); the other
// optional members follow omitempty.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/k8s/object_meta.h"
#include "lib/k8s/resource_info.h"
#include "nlohmann/json.hpp"

namespace dra::k8s {

// Label keys and values shared by the three ComputeDomain components. The CD label key is also
// the finalizer name.
inline constexpr absl::string_view kComputeDomainLabel = "resource.nvidia.com/computeDomain";
inline constexpr absl::string_view kComputeDomainFinalizer = "resource.nvidia.com/computeDomain";
inline constexpr absl::string_view kComputeDomainCliqueLabel =
    "resource.nvidia.com/computeDomain.cliqueID";
inline constexpr absl::string_view kComputeDomainTargetLabel =
    "resource.nvidia.com/computeDomainTarget";
inline constexpr absl::string_view kComputeDomainTargetDaemon = "Daemon";
inline constexpr absl::string_view kComputeDomainTargetWorkload = "Workload";
inline constexpr absl::string_view kComputeDomainStatusReady = "Ready";
inline constexpr absl::string_view kComputeDomainStatusNotReady = "NotReady";
inline constexpr absl::string_view kComputeDomainDriverName = "compute-domain.nvidia.com";
// Device binding conditions (KEP-5007) of the channel devices: the kubelet plugin publishes
// channel-0 with them (docs/compute-domains.md "Binding conditions"); the controller sets one of
// them True on the claim's status.devices entry once the domain's IMEX daemon on the allocated
// node is Ready (or the failure condition when it cannot become Ready), and the scheduler binds
// the pod only then.
inline constexpr absl::string_view kChannelBindingCondition = "IMEXDaemonReady";
inline constexpr absl::string_view kChannelBindingFailureCondition = "IMEXDaemonFailed";

struct ComputeDomainChannelSpec {
  std::string resource_claim_template_name;  // spec.channel.resourceClaimTemplate.name
  std::string allocation_mode;               // "Single" (default) | "All"
  nlohmann::json unknown_fields;
};

struct ComputeDomainSpec {
  int64_t num_nodes = 0;  // deprecated; 0 = do not wait for a node count
  ComputeDomainChannelSpec channel;
  nlohmann::json unknown_fields;
};

struct ComputeDomainNode {
  std::string name;        // node name
  std::string ip_address;  // the daemon pod's IP
  std::string clique_id;   // "<clusterUUID>.<cliqueID>", "" on a node without NVLink fabric
  int64_t index = 0;       // per-clique DNS index; -1 for a non-fabric node
  std::string status;      // "Ready" | "NotReady" | ""
  nlohmann::json unknown_fields;
  bool operator==(const ComputeDomainNode& o) const {
    return name == o.name && ip_address == o.ip_address && clique_id == o.clique_id &&
           index == o.index && status == o.status;
  }
};

struct ComputeDomainStatus {
  std::string status;  // "Ready" | "NotReady" | "" (not yet set)
  std::vector<ComputeDomainNode> nodes;
  nlohmann::json unknown_fields;
};

struct ComputeDomain {
  static constexpr ResourceInfo kResource{"resource.nvidia.com", "v1beta1", "ComputeDomain",
                                          "computedomains", true};
  ObjectMeta metadata;
  ComputeDomainSpec spec;
  ComputeDomainStatus status;
  nlohmann::json raw;  // the whole object as last decoded; empty for objects built in code

  static absl::StatusOr<ComputeDomain> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

struct ComputeDomainDaemonInfo {
  std::string node_name;
  std::string ip_address;
  std::string clique_id;
  int64_t index = 0;
  std::string status;  // "Ready" | "NotReady" | ""
  nlohmann::json unknown_fields;
  bool operator==(const ComputeDomainDaemonInfo& o) const {
    return node_name == o.node_name && ip_address == o.ip_address && clique_id == o.clique_id &&
           index == o.index && status == o.status;
  }
};

// Lives in the driver namespace, named CliqueObjectName(cd uid, clique id); written by the
// compute-domain controller from the daemon pods of that (domain, clique), read by the daemons
// and the kubelet plugin.
struct ComputeDomainClique {
  static constexpr ResourceInfo kResource{"resource.nvidia.com", "v1beta1", "ComputeDomainClique",
                                          "computedomaincliques", true};
  ObjectMeta metadata;
  std::vector<ComputeDomainDaemonInfo> daemons;
  nlohmann::json raw;

  static absl::StatusOr<ComputeDomainClique> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
};

// "<computeDomainUID>.<cliqueID>".
std::string CliqueObjectName(absl::string_view compute_domain_uid, absl::string_view clique_id);

// The index each entry of a clique's daemon list is entitled to, decided in list order (the order
// the API server serialized the appends in, the same for every reader): an entry keeps its index
// when it is >= 0 and no earlier entry is entitled to it; otherwise it is entitled to the smallest
// index no earlier entry is entitled to. An entry's result depends only on the entries before it,
// so once those hold their results, it never changes. Daemons append with the smallest free index
// they see, without a resourceVersion precondition; two that append at once may pick the same
// index, and the later one moves to its resolved index (docs/compute-domains.md, "At scale").
std::vector<int64_t> ResolvedIndices(const std::vector<ComputeDomainDaemonInfo>& daemons);

// The entries that hold their resolved index (the others are about to move and are not yet
// anybody's peer), in list order.
std::vector<ComputeDomainDaemonInfo> SettledDaemons(
    const std::vector<ComputeDomainDaemonInfo>& daemons);

}  // namespace dra::k8s
