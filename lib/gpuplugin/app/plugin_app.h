#pragma once

// The gpu-kubelet-plugin process: wiring of discovery, checkpoint, CDI, the kubelet-facing gRPC
// servers, the ResourceSlice publisher, metrics and cleanup, in the order of PluginApp's numbered
// steps below: NVML -> inventory -> ResourceSlices -> DRA gRPC server -> registration socket.
//
// Without a usable NVML (no library, no driver) the plugin still starts: it publishes no devices,
// logs a warning, sets the degraded metric, and serves unprepare for what the checkpoint holds.

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/common/feature_gates.h"
#include "lib/common/signals.h"
#include "lib/kubeletplugin/plugin_host.h"

namespace dra::gpu {

// The gpu-kubelet-plugin's configuration: the flags both kubelet plugins have
// (kubeletplugin::PluginHostConfig) and its own.
struct PluginConfig : kubeletplugin::PluginHostConfig {
  std::string sys_root = "/sys";
  // --host-root: where the host's / is mounted (gate PassthroughSupport: its sysfs, IOMMU groups,
  // modules.alias; modprobe and fuser run chrooted into it). Must exist with the gate on.
  std::string host_root = "/host-root";
  // disabled | memory | unlimited | N (api::ParseConsumableShares; not disabled needs the gate
  // ConsumableShares). Invalid values are a startup error.
  std::string consumable_shares = "disabled";
  // Limit for one nvidia-smi run (time-slicing); killed after it.
  absl::Duration nvidia_smi_timeout = absl::Seconds(30);
  // Comma-separated XIDs that only taint with effect None (gate NVMLDeviceHealthCheck), beyond
  // the built-in 13, 31, 43, 45, 68, 109. Entries that are not unsigned integers are skipped.
  std::string additional_xids_to_ignore;
  // How long a device tainted for a critical XID or a lost GPU must stay free of such events
  // before it is re-checked through NVML and its taint removed; 0 keeps taints until restart.
  absl::Duration health_recovery_quiet_period = absl::Minutes(5);
  // MPS control daemons (gate MPSSupport): their image (required with the gate), pull secrets
  // (comma-separated), pull policy ("" = Kubernetes default) and service account ("" = default).
  // They run in `namespace_name`.
  std::string image_name;
  std::string image_pull_secrets;
  std::string image_pull_policy;
  std::string service_account_name;
  // --device-status: write each prepared claim's status.devices entries (device_status.h). Off:
  // none are written; entries recorded by an earlier prepare are still removed at unprepare.
  bool device_status = true;
  // --prepare-trace: a per-stage trace line per prepare/unprepare (lib/common/trace.h).
  bool prepare_trace = false;
  // --claim-informer: prepare reads claims from kubeletplugin::ClaimCache (GET on a miss). Off by
  // default: the cache's watch carries every claim event of the cluster to every node.
  bool claim_informer = false;
};

// The running plugin: a kubeletplugin::PluginHost (plugin_host.h: directories, API clients,
// checkpoint policy, kubelet servers and registration, HTTP and health servers, cleanup thread,
// stop order) and the GPU parts, started in the order of the numbered steps below by Start() and
// stopped in the reverse order of their use by Stop(). A step that fails returns its error and
// the parts started before it are stopped by the destructor.
//
// Thread-safety: Start and Stop from one thread; the parts run their own threads (the cleanup
// thread is the host's).
class PluginApp {
 public:
  // `config` and `signals` must outlive the app.
  static absl::StatusOr<std::unique_ptr<PluginApp>> Start(const PluginConfig& config,
                                                          SignalHandler* signals);
  // Idempotent: the gRPC health port, the NVML health monitor, the kubelet servers (their sockets
  // removed, so the kubelet sees the plugin leave), the claim cache, the device status queue
  // (drained), the slice publisher, the cleanup thread, the HTTP server. When the plugins'
  // DaemonSet was deleted (an uninstall) and no claim is prepared, removes the driver's files: its
  // CDI specs and its plugin directory.
  void Stop();
  ~PluginApp();

  PluginApp(const PluginApp&) = delete;
  PluginApp& operator=(const PluginApp&) = delete;

 private:
  struct Parts;  // everything the steps create, in creation order (plugin_app_parts.h)
  PluginApp(const PluginConfig& config, SignalHandler* signals);

  absl::Status CheckConfig();         // 1: flags that must be right; host step 1, SIGUSR2 dump
  absl::Status ConnectToApiServer();  // 2: host step 2, the status client, the GPU metrics
  absl::Status DiscoverDevices();     // 3: driver root, NVML, inventory (degraded without)
  absl::Status OpenCheckpoint();      // 4: host step 3, boot ID, Go-driver adoption
  // PassthroughSupport: DeviceState's on_held_devices (republishes); null without the gate.
  std::function<void(const std::set<std::string>&)> OnHeldDevices();
  absl::Status BuildDeviceState();  // 5-6: CDI, time-slicing, MPS, DeviceState, GpuDriver
  // 6: host step 4; after a corrupt file the records of claims in use are rebuilt
  // (RebuildFromCdiSpecs); the prepared-device counts; device status requeued.
  void RecoverCheckpoint();
  std::string RebuildFromCdiSpecs();
  absl::Status PublishSlices();  // 7: host step 5, ResourceSlices (with health taints)
  absl::Status ServeKubelet();   // 8: host step 6, DRA socket, then the registration socket
  void StartHealthMonitor();     // 9: gate NVMLDeviceHealthCheck
  // 10: host steps 7 and 8: /metrics, /healthz, gRPC health port; the cleanup thread.
  void StartCleanup();
  // Part of 3 (gate FabricManagerPartitioning, a fabric under --host-root): the FM library, its
  // partitions, and the partition attributes of the inventory (fabric_step.h).
  absl::Status SetUpFabricManager();

  const PluginConfig& config_;
  SignalHandler* const signals_;
  std::unique_ptr<Parts> parts_;
  bool stopped_ = false;
};

// Starts the plugin, runs until `signals` reports shutdown, stops it; returns the startup error
// otherwise.
absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals);

}  // namespace dra::gpu
