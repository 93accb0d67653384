#pragma once

// The compute-domain-kubelet-plugin process (docs/compute-domains.md "Kubelet plugin"): wiring
// of the driver root, NVML (driver version, clique ID), the checkpoint, CDI, the ComputeDomain
// cache, the kubelet-facing gRPC servers, the ResourceSlice publisher, metrics and cleanup.
// Start order:
//   1 config checks (IMEX mode and isolation), data and CDI directories
//   2 API clients and metrics
//   3 driver root, NVML: driver version (>= 570.158.01, for DNS-named IMEX daemons, unless
//     hostManaged), clique ID
//     (strict with CrashOnNVLinkFabricErrors), the nvidia-caps-imex-channels major
//   4 checkpoint (boot ID rule)
//   5 the base CDI spec
//   6 the ComputeDomain informer (waits for its first list)
//   7 ResourceSlices, then the DRA socket and the registration socket (prepares run concurrently)
//   8 /metrics, /healthz, the gRPC health port; the nvidia.com/gpu.clique node label (optional)
//   9 the cleanup thread: every --cleanup-interval (10 min) the checkpoint cleanup, from the
//     second pass on also the stale per-domain directories and a rediscovery of the clique ID
//     (a new non-empty value is adopted for later prepares and the optional node label)
// A failed step stops the ones before it.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/common/feature_gates.h"
#include "lib/common/signals.h"

namespace dra::cdplugin {

inline constexpr char kMinDriverVersionForDnsNames[] = "570.158.01";
inline constexpr char kGpuCliqueLabel[] = "nvidia.com/gpu.clique";

struct PluginConfig {
  std::string node_name;
  std::string namespace_name = "default";  // the driver namespace (ComputeDomainCliques)
  // The plugins' DaemonSet in namespace_name: deleted (helm uninstall), the plugin removes its
  // files at shutdown (lib/kubeletplugin/uninstall.h). Empty: it never does.
  std::string daemonset_name;
  // This pod's UID: sockets named after it, so that the old and the new pod of a surge rollout
  // serve side by side (lib/kubeletplugin/plugin_server.h). Empty: the fixed socket names.
  std::string pod_uid;
  std::string cdi_root = "/etc/cdi";
  std::string nvidia_driver_root = "/";                // host view
  std::string container_driver_root = "/driver-root";  // plugin view
  std::string dev_root;                                // empty: derived from the driver root
  std::string proc_root = "/proc";                     // /proc/devices, capabilities
  std::string alt_proc_devices;  // --alt-proc-devices-path: read instead of <proc_root>/devices
  std::string kubelet_registrar_dir = "/var/lib/kubelet/plugins_registry";
  std::string kubelet_plugins_dir = "/var/lib/kubelet/plugins";
  std::string nvidia_cdi_hook_path;  // accepted for compatibility; no hook is used
  int healthcheck_port = -1;
  std::string http_endpoint;
  std::string metrics_path = "/metrics";
  std::string kubeconfig;
  double kube_api_qps = 5;
  int kube_api_burst = 10;
  bool gpu_clique_label_enabled = false;
  // --binding-conditions: publish channel-0 with the device binding conditions (slices.h).
  bool binding_conditions = true;
  std::string imex_mode = "driverManaged";
  std::string imex_isolation = "domain";
  std::string imex_host_socket_path = "/etc/nvidia-imex/imex_ctrl.sock";
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
  absl::Duration cleanup_interval = absl::Minutes(10);
  absl::Duration informer_sync_timeout = absl::Seconds(60);
  const FeatureGates* gates = nullptr;
};

// Thread-safety: Start and Stop from one thread; the parts run their own threads.
class PluginApp {
 public:
  static absl::StatusOr<std::unique_ptr<PluginApp>> Start(const PluginConfig& config,
                                                          SignalHandler* signals);
  // Idempotent: health port, kubelet servers (sockets removed), publisher, cleanup thread,
  // informer, HTTP server; removes the nvidia.com/gpu.clique label when it set it and no other
  // instance of the driver serves on the node (the new pod of a surge rollout, which set the
  // same label at its start, keeps it). When the
  // plugins' DaemonSet was deleted (an uninstall) and no claim is prepared, removes the driver's
  // files: its CDI specs (the base spec too) and its plugin directory.
  void Stop();
  ~PluginApp();

  PluginApp(const PluginApp&) = delete;
  PluginApp& operator=(const PluginApp&) = delete;

 private:
  struct Parts;
  PluginApp(const PluginConfig& config, SignalHandler* signals);

  absl::Status CheckConfig();
  bool host_managed() const { return config_.imex_mode == "hostManaged"; }
  absl::Status ConnectToApiServer();
  absl::Status InspectDriver();
  absl::Status OpenCheckpointAndCdi();
  absl::Status StartDomainCache();
  absl::Status ServeKubelet();
  // After the first publication with binding conditions: whether the stored slice kept them (an
  // API server without DRADeviceBindingConditions drops them). Logs once when not.
  bool ServerKeepsBindingConditions();
  absl::Status ServeHttpAndHealthPort();
  void LabelGpuClique();
  void RefreshCliqueId();  // each cleanup pass: a new non-empty clique ID is adopted
  void StartCleanup();
  void RemoveFilesIfUninstalled();

  const PluginConfig& config_;
  SignalHandler* const signals_;
  std::unique_ptr<Parts> parts_;
  bool stopped_ = false;
};

absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals);

}  // namespace dra::cdplugin
