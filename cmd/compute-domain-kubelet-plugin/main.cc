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
  flags
      .AddString("node-name", "NODE_NAME", &c.node_name,
                 "Node to work on; also the ResourceSlice pool name.")
      .Required();
  flags.AddString("namespace", "NAMESPACE", &c.namespace_name,
                  "The driver's namespace, where the ComputeDomainClique objects live.");
  flags.AddString("daemonset-name", "DAEMONSET_NAME", &c.daemonset_name,
                  "This plugin's DaemonSet in --namespace. When it is deleted (helm uninstall), "
                  "the plugin removes its files at shutdown: its CDI specs and its plugin "
                  "directory, unless a claim is still prepared. Empty: it never does.");
  flags.AddString("pod-uid", "POD_UID", &c.pod_uid,
                  "This pod's UID (downward API). When set, sockets carry it so that an old and "
                  "a new plugin pod can serve side by side during a rolling update (kubelet "
                  ">= 1.33).");
  flags.AddString("cdi-root", "CDI_ROOT", &c.cdi_root,
                  "Directory for the generated CDI specs (created 0750 if missing).");
  flags
      .AddString("nvidia-driver-root", "NVIDIA_DRIVER_ROOT", &c.nvidia_driver_root,
                 "Host path of the NVIDIA driver installation (/ or /run/nvidia/driver); the "
                 "host-side paths in CDI specs.")
      .Alias("host-driver-root")
      .Env("HOST_DRIVER_ROOT");
  flags.AddString("container-driver-root", "DRIVER_ROOT_CTR_PATH", &c.container_driver_root,
                  "Where the host driver root is mounted in this container; NVML, nvidia-imex "
                  "and the driver files are looked up here.");
  flags.AddString("dev-root", "DEV_ROOT", &c.dev_root,
                  "Where /dev is found; empty: the driver root if it has a /dev, else /.");
  flags.AddString("proc-root", "PROC_ROOT", &c.proc_root,
                  "Where /proc is found (/proc/devices for the IMEX channel major, the "
                  "fabric-imex-mgmt capability).");
  flags.AddString("alt-proc-devices-path", "ALT_PROC_DEVICES_PATH", &c.alt_proc_devices,
                  "A file read instead of <proc-root>/devices for the IMEX channel device major, "
                  "for nodes whose kernel has no NVIDIA entries there (simulated GPUs; the "
                  "chart's altProcDevices). Empty: <proc-root>/devices.");
  flags.AddString("nvidia-cdi-hook-path", "NVIDIA_CDI_HOOK_PATH", &c.nvidia_cdi_hook_path,
                  "Accepted for compatibility with the Go driver's chart; unused (the CDI specs "
                  "need no hook).");
  flags.AddString("kubelet-registrar-directory-path", "KUBELET_REGISTRAR_DIRECTORY_PATH",
                  &c.kubelet_registrar_dir, "Kubelet plugin registration directory.");
  flags.AddString("kubelet-plugins-directory-path", "KUBELET_PLUGINS_DIRECTORY_PATH",
                  &c.kubelet_plugins_dir,
                  "Parent of the plugin data directory <this>/compute-domain.nvidia.com "
                  "(socket, checkpoint, per-domain IMEX config directories).");
  flags.AddInt("healthcheck-port", "HEALTHCHECK_PORT", &c.healthcheck_port,
               "gRPC health service port: >0 that port, 0 any free port, <0 disabled.");
  flags.AddMetricsServerFlags(&c.http_endpoint, &c.metrics_path);
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
  flags.AddKubeClientFlags(&c.kubeconfig, &c.kube_api_qps, &c.kube_api_burst);
  flags.AddDuration("cleanup-interval", "CLEANUP_INTERVAL", &c.cleanup_interval,
                    "How often half-prepared claims whose ResourceClaim is gone are unprepared, "
                    "expired aborted records dropped and directories of deleted ComputeDomains "
                    "removed.");
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
