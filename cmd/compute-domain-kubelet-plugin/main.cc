// compute-domain-kubelet-plugin: the kubelet plugin of the compute-domain.nvidia.com DRA driver
// (IMEX channels and IMEX daemons of ComputeDomains). Flags and wiring only; the work is in
// lib/cdplugin (plugin_app.h).

#include <cstdio>

#include "lib/api/driver_gates.h"
#include "lib/cdplugin/plugin_app.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/stack_dump.h"
#include "lib/kubeletplugin/plugin_host.h"

int main(int argc, char** argv) {
  constexpr char kName[] = "compute-domain-kubelet-plugin";
  dra::InitializeStackDumpSymbolizer(argv[0]);
  // Signals are blocked before any thread starts so that only the handler thread receives them.
  auto signals = dra::SignalHandler::Start();
  if (!signals.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, std::string(signals.status().message()).c_str());
    return 1;
  }
  dra::FeatureGates gates;
  if (absl::Status s = dra::api::RegisterDriverFeatureGates(gates, kName); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, std::string(s.message()).c_str());
    return 1;
  }
  dra::cdplugin::PluginConfig c;
  c.gates = &gates;
  dra::Flags flags(kName,
                   "compute-domain-kubelet-plugin implements the DRA kubelet plugin of NVIDIA "
                   "ComputeDomains (IMEX channels and IMEX daemons).");
  dra::kubeletplugin::AddPluginHostFlags(
      flags, &c,
      {.namespace_name = "The driver's namespace, where the ComputeDomainClique objects live.",
       .cdi_root = "Directory for the generated CDI specs (created 0750 if missing).",
       .container_driver_root = "Where the host driver root is mounted in this container; NVML, "
                                "nvidia-imex and the driver files are looked up here.",
       .proc_root = "Where /proc is found (/proc/devices for the IMEX channel major, the "
                    "fabric-imex-mgmt capability).",
       .alt_proc_devices = "A file read instead of <proc-root>/devices for the IMEX channel "
                           "device major, for nodes whose kernel has no NVIDIA entries there "
                           "(simulated GPUs; the chart's altProcDevices). Empty: "
                           "<proc-root>/devices.",
       .kubelet_plugins_dir = "Parent of the plugin data directory "
                              "<this>/compute-domain.nvidia.com (socket, checkpoint, per-domain "
                              "IMEX config directories).",
       .cleanup_interval = "How often half-prepared claims whose ResourceClaim is gone are "
                           "unprepared, expired aborted records dropped and directories of "
                           "deleted ComputeDomains removed."});
  flags.AddBool("gpu-clique-label-enabled", "GPU_CLIQUE_LABEL_ENABLED", &c.gpu_clique_label_enabled,
                "Label the node nvidia.com/gpu.clique=<cliqueID> while the plugin runs (nodes "
                "with a clique ID only).");
  flags.AddBool("binding-conditions", "BINDING_CONDITIONS", &c.binding_conditions,
                "Publish the IMEX channel device with device binding conditions (KEP-5007), so "
                "that the scheduler binds a workload pod only once the ComputeDomain controller "
                "reported the node's IMEX daemon Ready (needs the controller's "
                "--binding-conditions). Without them, or on a cluster without "
                "DRADeviceBindingConditions, the prepare waits for the daemon. Ignored with "
                "--imex-mode=hostManaged.");
  flags.AddString("imex-mode", "IMEX_MODE", &c.imex_mode,
                  "Who runs the IMEX daemons: driverManaged (per-ComputeDomain daemon pods) or "
                  "hostManaged (the hosts run nvidia-imex; needs the feature gate "
                  "HostManagedIMEXDaemon).");
  flags.AddString("imex-isolation", "IMEX_ISOLATION", &c.imex_isolation,
                  "IMEX isolation: domain (channel is not supported yet).");
  flags.AddString("imex-host-socket-path", "IMEX_HOST_SOCKET_PATH", &c.imex_host_socket_path,
                  "Host path of a host-managed IMEX daemon's command socket "
                  "(IMEX_CMD_UNIX_DOMAIN_PATH), queried under the dev root with "
                  "nvidia-imex-ctl -q --u=<socket> (imex-mode hostManaged only).");
  flags.AddLoggingFlags();
  flags.AddFeatureGatesFlag(&gates);
  flags.SetVersion(DRA_VERSION);
  flags.ParseOrExit(argc, argv);
  flags.LogStartupConfig(&gates);

  absl::Status s = dra::cdplugin::RunPlugin(c, signals->get());
  if (!s.ok()) {
    DRA_ERROR("compute-domain-kubelet-plugin failed", "err", s);
    return 1;
  }
  return 0;
}
