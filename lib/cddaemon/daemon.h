#pragma once

// compute-domain-daemon's two subcommands (spec "compute-domain-daemon"; docs/compute-domains.md):
//   run    label the own pod with the clique ID (the controller then lists it in the
//          ComputeDomainClique), keep /etc/hosts and nvidia-imex in step with the clique; on
//          SIGTERM stop IMEX.
//   check  the probe: asks the local nvidia-imex (via nvidia-imex-ctl) whether it is READY.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/common/signals.h"

namespace dra::cddaemon {

struct DaemonConfig {
  // From the kubelet plugin's CDI edits.
  std::string clique_id;
  std::string compute_domain_uid;
  std::string compute_domain_name;
  std::string compute_domain_namespace = "default";
  // From the DaemonSet (downward API).
  std::string node_name;
  std::string pod_ip;
  std::string pod_uid;
  std::string pod_name;
  std::string pod_namespace;
  int max_nodes_per_imex_domain = 0;
  // Paths, overridable so that tests run the daemon outside a container.
  std::string imexd_dir = "/imexd";
  std::string hosts_file = "/etc/hosts";
  std::string imex_binary = "nvidia-imex";          // looked up in PATH without a '/'
  std::string imex_ctl_binary = "nvidia-imex-ctl";  // looked up in PATH without a '/'
  std::string kubeconfig;                           // empty: in-cluster (or $KUBECONFIG)
  absl::Duration imex_stop_timeout = absl::Seconds(10);
  // Below the probes' 10 s timeoutSeconds, so that the kubelet records our message.
  absl::Duration check_timeout = absl::Seconds(8);
};

// Runs until `signals` reports shutdown. An error for misconfiguration (no CDI edits, missing
// identity) or a fatal failure (pod label patch, config files, first IMEX start).
absl::Status RunDaemon(const DaemonConfig& config, SignalHandler* signals);

// OK when the clique ID is empty (non-fabric node: nothing to check) or when
// `nvidia-imex-ctl -c <imexd>/imexd.cfg -q` exits 0 printing exactly "READY\n"; otherwise
// Unavailable with the tool's output. Prints nothing itself.
absl::Status RunCheck(const DaemonConfig& config);

}  // namespace dra::cddaemon
