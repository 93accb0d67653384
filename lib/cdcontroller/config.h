#pragma once

// Configuration of the compute-domain-controller and its flags (each with one env var).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dra {
class Flags;
class FeatureGates;
}  // namespace dra

namespace dra::cdcontroller {

inline constexpr absl::string_view kImexModeDriverManaged = "driverManaged";
inline constexpr absl::string_view kImexModeHostManaged = "hostManaged";
inline constexpr absl::string_view kImexIsolationDomain = "domain";
inline constexpr absl::string_view kImexIsolationChannel = "channel";

struct ControllerConfig {
  std::string pod_name;
  std::string driver_namespace = "default";        // --namespace: DaemonSets, daemon RCTs, cliques
  std::vector<std::string> additional_namespaces;  // legacy DaemonSets are deleted there too
  std::string image_name;
  std::string image_pull_policy = "IfNotPresent";
  std::vector<std::string> image_pull_secrets;
  std::string log_verbosity_cd_daemon;
  int max_nodes_per_imex_domain = 18;
  std::string imex_mode = std::string(kImexModeDriverManaged);
  std::string imex_isolation = std::string(kImexIsolationDomain);
  absl::Duration daemon_readiness_period = absl::Seconds(10);
  std::string feature_gates_text;  // FEATURE_GATES rendered into the daemon pods
  // --binding-conditions: report IMEX daemon readiness on ResourceClaims whose channel devices
  // carry binding conditions (binding.h); watches ResourceClaims of all namespaces. driverManaged
  // only.
  bool binding_conditions = true;

  // Timers.
  absl::Duration informer_resync = absl::Minutes(10);
  absl::Duration status_resync = absl::Seconds(30);  // safety net beside the event-driven sync
  absl::Duration cleanup_interval = absl::Minutes(10);

  // Tests only (hidden flag --watch-namespace): reconcile only ComputeDomains of this namespace
  // (and their workload RCTs there). Empty: all namespaces.
  std::string watch_namespace;
  // Whether node labels of ComputeDomains that no longer exist are removed (on every CD event and
  // every cleanup_interval). Off by default when watch_namespace is set, since CDs of other
  // namespaces are then unknown to this instance.
  bool stale_node_label_cleanup = true;
  // Tests only: when set, stale node-label cleanup only touches labels whose CD UID it accepts.
  std::function<bool(absl::string_view cd_uid)> node_label_cleanup_filter;

  bool host_managed() const { return imex_mode == kImexModeHostManaged; }
};

// Checks the IMEX mode and isolation and the other values; `host_managed_gate` is the
// HostManagedIMEXDaemon gate. Errors name the flag, the value and what is allowed.
absl::Status ValidateConfig(const ControllerConfig& config, bool host_managed_gate);

// Flags of the controller besides leader election, logging, kube client and HTTP (added by
// AddControllerFlags too; their targets are in ProcessOptions).
struct ProcessOptions {
  ControllerConfig controller;
  std::string kubeconfig;
  double kube_api_qps = 5;
  int kube_api_burst = 10;
  std::string http_endpoint;
  std::string metrics_path = "/metrics";
  std::string pprof_path;
  bool leader_election_enabled = false;
  std::string leader_election_namespace = "default";
  std::string leader_election_name = "nvidia-compute-domain-controller";
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
};

// Declares every flag of compute-domain-controller into `flags`, with `gates` behind
// --feature-gates.
void AddControllerFlags(Flags& flags, ProcessOptions* options, FeatureGates* gates);

}  // namespace dra::cdcontroller
