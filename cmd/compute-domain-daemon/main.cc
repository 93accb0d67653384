// compute-domain-daemon: the per-node IMEX daemon manager of a ComputeDomain (one pod per node per
// domain, started by the controller's DaemonSet). Flags and wiring only; the work is in
// lib/cddaemon (daemon.h).

#include <cstdio>
#include <string>

#include "lib/api/driver_gates.h"
#include "lib/cddaemon/daemon.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/stack_dump.h"

int main(int argc, char** argv) {
  dra::InitializeStackDumpSymbolizer(argv[0]);
  dra::FeatureGates gates;
  if (absl::Status s = dra::api::RegisterDriverFeatureGates(gates, "compute-domain-daemon");
      !s.ok()) {
    std::fprintf(stderr, "compute-domain-daemon: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  dra::cddaemon::DaemonConfig c;
  dra::Flags flags("compute-domain-daemon",
                   "compute-domain-daemon runs and supervises the IMEX daemon of one node of a "
                   "ComputeDomain, registers it in the domain's ComputeDomainClique and keeps the "
                   "IMEX peers' DNS names resolvable.");
  flags.AddCommand("run", "Register in the clique, run nvidia-imex, keep /etc/hosts current.");
  flags.AddCommand("check", "Probe: succeed when the local nvidia-imex reports READY.");
  flags.AddString("cliqueid", "CLIQUE_ID", &c.clique_id,
                  "NVLink clique ID of this node (set by the kubelet plugin's CDI edits); empty "
                  "on a node without NVLink fabric: the daemon then only labels its pod.");
  flags.AddString("compute-domain-uuid", "COMPUTE_DOMAIN_UUID", &c.compute_domain_uid,
                  "UID of the ComputeDomain (CDI edits); `run` refuses to start without it.");
  flags.AddString("compute-domain-name", "COMPUTE_DOMAIN_NAME", &c.compute_domain_name,
                  "Name of the ComputeDomain (CDI edits; logged).");
  flags.AddString("compute-domain-namespace", "COMPUTE_DOMAIN_NAMESPACE",
                  &c.compute_domain_namespace, "Namespace of the ComputeDomain (CDI edits).");
  flags.AddString("node-name", "NODE_NAME", &c.node_name,
                  "Node this daemon runs on: the key of its clique entry.");
  flags.AddString("pod-ip", "POD_IP", &c.pod_ip,
                  "IP of this daemon's pod: its clique entry's address and the IMEX command "
                  "interface.");
  flags.AddString("pod-uid", "POD_UID", &c.pod_uid,
                  "UID of this daemon's pod (owner reference on the clique).");
  flags.AddString("pod-name", "POD_NAME", &c.pod_name, "Name of this daemon's pod.");
  flags.AddString("pod-namespace", "POD_NAMESPACE", &c.pod_namespace,
                  "Namespace of this daemon's pod: the driver namespace, where the clique lives.");
  flags.AddInt("max-nodes-per-imex-domain", "MAX_NODES_PER_IMEX_DOMAIN",
               &c.max_nodes_per_imex_domain,
               "Size of the static nodes file and the number of clique indices (at least 1 when "
               "the clique ID is set).");
  flags.AddString("imexd-dir", "IMEXD_DIR", &c.imexd_dir,
                  "Directory with imexd.cfg.tmpl (from the kubelet plugin); imexd.cfg and "
                  "nodes.cfg are written there.");
  flags.AddString("hosts-file", "HOSTS_FILE", &c.hosts_file,
                  "Hosts file that maps compute-domain-daemon-NNNN names to peer pod IPs.");
  flags.AddString("imex-binary", "IMEX_BINARY", &c.imex_binary,
                  "nvidia-imex program (looked up in PATH when it has no '/').");
  flags.AddString("imex-ctl-binary", "IMEX_CTL_BINARY", &c.imex_ctl_binary,
                  "nvidia-imex-ctl program used by `check` (looked up in PATH when it has no "
                  "'/').");
  flags.AddDuration("imex-stop-timeout", "IMEX_STOP_TIMEOUT", &c.imex_stop_timeout,
                    "How long nvidia-imex gets to exit after SIGTERM before SIGKILL.");
  flags.AddDuration("check-timeout", "CHECK_TIMEOUT", &c.check_timeout,
                    "How long `check` waits for nvidia-imex-ctl before failing.");
  flags.AddKubeClientFlags(&c.kubeconfig, /*qps=*/nullptr, /*burst=*/nullptr);
  flags.AddLoggingFlags();
  flags.AddFeatureGatesFlag(&gates);
  flags.SetVersion(DRA_VERSION);
  flags.ParseOrExit(argc, argv);

  if (flags.command() == "check") {
    // Quiet: the kubelet runs this every probe period and records only failures' output.
    absl::Status s = dra::cddaemon::RunCheck(c);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    return 0;
  }

  // Signals are blocked before any thread starts so that only the handler thread receives them.
  auto signals = dra::SignalHandler::Start();
  if (!signals.ok()) {
    std::fprintf(stderr, "compute-domain-daemon: %s\n",
                 std::string(signals.status().message()).c_str());
    return 1;
  }
  (*signals)->OnUsr2(
      [] { (void)dra::DumpAllThreadStacks("/tmp/compute-domain-daemon-stacks.dump"); });
  flags.LogStartupConfig(&gates);
  absl::Status s = dra::cddaemon::RunDaemon(c, signals->get());
  if (!s.ok()) {
    DRA_ERROR("compute-domain-daemon failed", "err", s);
    return 1;
  }
  return 0;
}
