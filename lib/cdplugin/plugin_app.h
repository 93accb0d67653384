#pragma once

// The compute-domain-kubelet-plugin process (docs/compute-domains.md "Kubelet plugin"): wiring
// of the driver root, NVML (driver version, clique ID), the checkpoint, CDI, the ComputeDomain
// cache, the kubelet-facing gRPC servers, the ResourceSlice publisher, metrics and cleanup.
// The scaffolding both plugins share is a kubeletplugin::PluginHost (plugin_host.h; its step
// numbers in brackets). Start order:
//   1 config checks (IMEX mode and isolation), data and CDI directories [1]
//   2 API clients and metrics [2]
//   3 driver root, NVML: driver version (>= 570.158.01, for DNS-named IMEX daemons, unless
//     hostManaged), clique ID
//     (strict with CrashOnNVLinkFabricErrors), the nvidia-caps-imex-channels major
//   4 checkpoint (boot ID rule, the corruption policy of both plugins) [3]; a corrupt one
//     reported at once (its claims' records cannot be rebuilt) [4]
//   5 the base CDI spec
//   6 the ComputeDomain informer (waits for its first list), the device state
//   7 ResourceSlices, then the DRA socket and the registration socket (prepares run
//     concurrently) [5, 6]
//   8 /metrics, /healthz, the gRPC health port [7]; the nvidia.com/gpu.clique node label
//     (optional)
//   9 the cleanup thread [8]: every --cleanup-interval (10 min) the checkpoint cleanup, from the
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
#include "lib/kubeletplugin/plugin_host.h"

namespace dra::cdplugin {

inline constexpr char kMinDriverVersionForDnsNames[] = "570.158.01";
inline constexpr char kGpuCliqueLabel[] = "nvidia.com/gpu.clique";

// The compute-domain-kubelet-plugin's configuration: the flags both kubelet plugins have
// (kubeletplugin::PluginHostConfig) and its own.
struct PluginConfig : kubeletplugin::PluginHostConfig {
  bool gpu_clique_label_enabled = false;
  // --binding-conditions: publish channel-0 with the device binding conditions (slices.h).
  bool binding_conditions = true;
  std::string imex_mode = "driverManaged";
  std::string imex_isolation = "domain";
  std::string imex_host_socket_path = "/etc/nvidia-imex/imex_ctrl.sock";
  absl::Duration informer_sync_timeout = absl::Seconds(60);
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
  void LabelGpuClique();
  void RefreshCliqueId();  // each cleanup pass: a new non-empty clique ID is adopted
  void StartCleanup();
  void RemoveCliqueLabel();  // in Stop

  const PluginConfig& config_;
  SignalHandler* const signals_;
  std::unique_ptr<Parts> parts_;
  bool stopped_ = false;
};

absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals);

}  // namespace dra::cdplugin
