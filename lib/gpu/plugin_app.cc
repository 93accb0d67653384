#include "lib/gpu/plugin_app.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/api/consumable_shares.h"
#include "lib/api/driver_gates.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/stack_dump.h"
#include "lib/common/status.h"
#include "lib/driverroot/driver_root.h"
#include "lib/gpu/claim_cdi.h"
#include "lib/gpu/cleanup.h"
#include "lib/gpu/device_health.h"
#include "lib/gpu/device_state.h"
#include "lib/gpu/driver.h"
#include "lib/gpu/go_prepared.h"
#include "lib/gpu/health_server.h"
#include "lib/gpu/inventory.h"
#include "lib/gpu/mps_sharing.h"
#include "lib/gpu/nvidia_smi.h"
#include "lib/gpu/rebuild.h"
#include "lib/gpu/slices.h"
#include "lib/gpu/time_slicing.h"
#include "lib/k8s/client.h"
#include "lib/k8s/events.h"
#include "lib/k8s/objects_core.h"
#include "lib/kubeletplugin/claim_source.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/slice_publisher.h"
#include "lib/metrics/http_server.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {
namespace {

constexpr char kComponent[] = "gpu-kubelet-plugin";

// NVML discovery; a missing library or driver leaves the node without devices (degraded).
// The loaded library is kept in `nvml` for the device health monitor.
absl::StatusOr<Inventory> DiscoverDevices(const PluginConfig& config,
                                          const driverroot::DriverRoot& root,
                                          std::unique_ptr<nvml::Nvml>& nvml) {
  ASSIGN_OR_RETURN(nvml, nvml::Nvml::Create(root.root()));
  ASSIGN_OR_RETURN(nvml::Session session, nvml->Open());
  return Discover(session,
                  {.sysfs_root = config.sys_root,
                   .list_type_attributes =
                       config.gates != nullptr && config.gates->Enabled("DRAListTypeAttributes")});
}

// What every MPS control daemon of this plugin shares (docs/mps.md).
MpsDaemonEnv MpsEnv(const PluginConfig& config, const std::string& plugin_dir, k8s::Client* client,
                    const NvidiaSmi* smi) {
  MpsDaemonEnv env;
  env.node_name = config.node_name;
  env.ns = config.namespace_name;
  env.image = config.image_name;
  // As the Go driver: commas become spaces, then the words.
  env.image_pull_secrets =
      absl::StrSplit(config.image_pull_secrets, absl::ByAnyChar(", \t\n"), absl::SkipEmpty());
  env.image_pull_policy = std::string(absl::StripAsciiWhitespace(config.image_pull_policy));
  env.service_account = config.service_account_name;
  env.host_driver_root = config.nvidia_driver_root;
  env.container_driver_root = config.container_driver_root;
  env.plugin_data_dir = plugin_dir;
  env.feature_gates = config.gates != nullptr ? config.gates->ToString() : "";
  env.client = client;
  env.set_compute_mode = [smi](const std::string& uuid, absl::string_view mode) {
    return smi->Run({"-i", uuid, "-c", std::string(mode)}).status();
  };
  return env;
}

}  // namespace

absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals) {
  if (config.node_name.empty()) return absl::InvalidArgumentError("--node-name is required");
  if (config.gates != nullptr && config.gates->Enabled(api::gate::kMPSSupport) &&
      config.image_name.empty()) {
    return absl::InvalidArgumentError(
        "--image-name is required when the feature gate MPSSupport is enabled (the image of the "
        "MPS control daemon pods)");
  }
  FeatureGates no_gates;
  ASSIGN_OR_RETURN(api::ConsumableShares shares,
                   api::ParseConsumableShares(config.consumable_shares,
                                              config.gates != nullptr ? *config.gates : no_gates));
  const std::string plugin_dir = absl::StrCat(config.kubelet_plugins_dir, "/", kDriverName);
  RETURN_IF_ERROR(MakeDirectories(plugin_dir, 0750));
  // SIGUSR2 writes every thread's stack to a file, for debugging a stuck plugin: in a directory
  // of the plugin's own that only root may enter (not a world-writable /tmp, where another user
  // could plant a link or read the stacks).
  const std::string debug_dir = absl::StrCat(plugin_dir, "/debug");
  RETURN_IF_ERROR(MakeDirectories(debug_dir, 0700));
  if (::chmod(debug_dir.c_str(), 0700) != 0) {
    return dra::ErrnoToStatus(errno, absl::StrCat("chmod 0700 ", debug_dir));
  }
  InstallStackDumpHandler();
  signals->OnUsr2([path = absl::StrCat(debug_dir, "/thread-stacks.dump")] {
    int threads = 0;
    absl::Status s = DumpAllThreadStacks(path, &threads);
    if (s.ok()) {
      DRA_INFO("wrote thread stacks", "path", path, "threads", threads);
    } else {
      DRA_WARNING("thread stack dump failed", "err", s);
    }
  });
  RETURN_IF_ERROR(MakeDirectories(config.cdi_root, 0750));

  ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::ResolveRestConfig(config.kubeconfig));
  ASSIGN_OR_RETURN(auto client, k8s::Client::Create(rest, {.qps = config.kube_api_qps,
                                                           .burst = config.kube_api_burst}));
  // The claim GETs of a prepare call must fail fast rather than run past the kubelet's 45 s.
  ASSIGN_OR_RETURN(auto claim_client,
                   k8s::Client::Create(rest, {.qps = config.kube_api_qps,
                                              .burst = config.kube_api_burst,
                                              .max_retries = 1,
                                              .request_timeout = absl::Seconds(10)}));
  k8s::EventTarget node_ref{.kind = "Node", .name = config.node_name};

  metrics::Registry registry;
  DriverMetrics driver_metrics(&registry, kDriverName, config.node_name);
  auto* degraded =
      registry.AddGauge("nvidia_dra_plugin_degraded",
                        "1 when the plugin runs without a usable NVML (no devices).", {"reason"});

  ASSIGN_OR_RETURN(auto root,
                   driverroot::DriverRoot::Create({.root = config.container_driver_root,
                                                   .host_root = config.nvidia_driver_root,
                                                   .dev_root = config.dev_root,
                                                   .proc_root = config.proc_root,
                                                   .sys_root = config.sys_root}));
  Inventory inventory;
  std::unique_ptr<nvml::Nvml> nvml_library;
  auto discovered = DiscoverDevices(config, *root, nvml_library);
  if (discovered.ok()) {
    inventory = std::move(*discovered);
    DRA_INFO("discovered devices", "node", config.node_name, "devices", inventory.devices.size(),
             "driverVersion", inventory.driver_version);
    // Hardware that degraded the node (a lost GPU, a capacity NVML does not report): each was
    // logged by discovery; the Node event makes it visible to the cluster's operators.
    if (!inventory.left_out.empty()) {
      (void)k8s::PostEvent(client.get(), node_ref, "Warning", "DevicesLeftOut",
                           absl::StrCat("not published: ", absl::StrJoin(inventory.left_out, "; ")),
                           kComponent, config.node_name);
    }
  } else {
    DRA_WARNING("no usable NVML: publishing no devices, serving unprepare only", "err",
                discovered.status());
    degraded->WithLabels({"nvml"})->Set(1);
    (void)k8s::PostEvent(client.get(), node_ref, "Warning", "NVMLUnavailable",
                         std::string(discovered.status().message()), kComponent, config.node_name);
  }

  checkpoint::CheckpointOptions cp_options;
  auto* corrupt = registry.AddCounter("nvidia_dra_checkpoint_corruptions_total",
                                      "Corrupt checkpoints moved aside and replaced.", {});
  // A corrupt checkpoint is replaced by an empty one; the records of claims still in use are then
  // rebuilt from their CDI specs and the API server (rebuild.h): at startup before serving, and
  // at any later read by a cleanup pass started at once. The Node event says what came of it.
  std::atomic<bool> serving{false};
  std::atomic<bool> cleanup_now{false};
  cp_options.on_corruption = [&](const checkpoint::CorruptionReport& r) {
    corrupt->WithLabels({})->Inc();
    if (!serving) return;  // the startup rebuild below posts the event with its outcome
    cleanup_now = true;
    (void)k8s::PostEvent(
        client.get(), node_ref, "Warning", "CheckpointCorrupt",
        absl::StrCat("checkpoint ", r.path, " was corrupt (", r.reason, "); moved to ", r.moved_to,
                     "; the records of claims still in use on this node are being rebuilt from "
                     "their CDI specs and the API server by the cleanup"),
        kComponent, config.node_name);
  };
  // A node switched from the Go driver: its checkpoint's claims are adopted (checkpoint.h A1-A5),
  // so their containers keep their CDI specs and their unprepare undoes what the Go driver set.
  cp_options.convert_go_devices = GoDevicesConverter(inventory, config.namespace_name);
  cp_options.on_adoption = [&](const checkpoint::AdoptionReport& r) {
    (void)k8s::PostEvent(
        client.get(), node_ref, "Normal", "CheckpointAdopted",
        absl::StrCat("adopted ", r.claims, " prepared claims (", r.started,
                     " of them PrepareStarted) from the Go driver's checkpoint ", r.path,
                     "; the Go driver's file is kept at ", r.kept_at, " for a rollback"),
        kComponent, config.node_name);
  };
  ASSIGN_OR_RETURN(auto checkpoint,
                   checkpoint::Checkpoint::Open(plugin_dir, config.boot_id_path, cp_options));

  auto cdi_or = ClaimCdi::Create(root.get(), config.cdi_root, inventory.driver_version);
  if (!cdi_or.ok()) {
    DRA_WARNING("driver files not found; CDI specs will carry device nodes only", "err",
                cdi_or.status());
    degraded->WithLabels({"driver-files"})->Set(1);
    cdi_or = ClaimCdi::CreateWithCommonEdits(root.get(), config.cdi_root, {});
  }
  if (!cdi_or.ok()) return cdi_or.status();
  std::unique_ptr<ClaimCdi> cdi = std::move(*cdi_or);
  NvidiaSmi nvidia_smi(root.get(), config.nvidia_smi_timeout);
  TimeSlicing time_slicing(&nvidia_smi);
  // Also without the gate: unprepare stops the daemons a checkpoint records. Its API calls fail
  // fast like the claim GETs, inside the kubelet's timeouts.
  std::unique_ptr<MpsDaemons> mps =
      MpsDaemons::Real(MpsEnv(config, plugin_dir, claim_client.get(), &nvidia_smi));
  DeviceState state(inventory, cdi.get(), checkpoint.get(),
                    {.pool_name = config.node_name,
                     .gates = config.gates,
                     .consumable_shares = shares,
                     .time_slicing = &time_slicing,
                     .mps = mps.get()});
  GpuDriver driver(&state, plugin_dir, &driver_metrics);
  std::unique_ptr<ClaimApi> claim_api =
      ClaimApiFromClient(claim_client.get(), kDriverName, config.node_name);
  if (const auto& r = checkpoint->open_corruption()) {
    absl::StatusOr<SpecReconciliation> rebuilt =
        ReconcileCdiSpecs(*claim_api, *cdi, *checkpoint, state, driver, /*remove_orphans=*/false);
    const std::string outcome =
        rebuilt.ok() ? rebuilt->Summary(/*removed_orphans=*/false)
                     : absl::StrCat("rebuilding from the CDI specs failed (",
                                    rebuilt.status().message(), "); the cleanup tries again");
    DRA_WARNING("checkpoint was corrupt; rebuilt what the CDI specs and the API server show",
                "path", r->path, "movedTo", r->moved_to, "outcome", outcome);
    (void)k8s::PostEvent(client.get(), node_ref, "Warning", "CheckpointCorrupt",
                         absl::StrCat("checkpoint ", r->path, " was corrupt (", r->reason,
                                      "); moved to ", r->moved_to, "; ", outcome),
                         kComponent, config.node_name);
  }
  if (auto claims = checkpoint->List(); claims.ok()) state.CountPreparedDevices(*claims);
  driver.RefreshPreparedDevicesGauge();
  serving = true;

  ASSIGN_OR_RETURN(auto publisher,
                   kubeletplugin::SlicePublisher::Create(
                       client.get(), {.driver = kDriverName, .node_name = config.node_name}));
  // With NVMLDeviceHealthCheck, devices carry the taints their NVML events imply
  // (docs/compatibility.md "Device health") and the kubelet gets their health through the
  // DRAResourceHealth stream.
  std::unique_ptr<DeviceHealthTracker> health_tracker;
  if (config.gates != nullptr && config.gates->Enabled(api::gate::kNVMLDeviceHealthCheck)) {
    std::vector<std::string> monitored;
    for (const auto& [placement, name] : DevicePlacements(inventory)) monitored.push_back(name);
    health_tracker = std::make_unique<DeviceHealthTracker>(
        config.node_name, std::move(monitored),
        ParseAdditionalIgnoredXids(config.additional_xids_to_ignore));
  }
  auto desired_resources = [&] {
    kubeletplugin::DriverResources resources =
        BuildDriverResources(inventory, config.node_name, shares);
    if (health_tracker) {
      for (auto& [pool_name, pool] : resources.pools) {
        for (auto& slice : pool.slices) health_tracker->ApplyTaints(slice.devices);
      }
    }
    return resources;
  };
  publisher->Update(desired_resources());
  if (shares.Enabled()) {
    DRA_INFO("consumable shares enabled: devices allow multiple allocations", "mode",
             shares.ToString());
  }

  kubeletplugin::PluginServerOptions server_options;
  server_options.driver_name = kDriverName;
  server_options.claim_getter = kubeletplugin::ClaimGetterFromClient(claim_client.get());
  server_options.kubelet_plugins_dir = config.kubelet_plugins_dir;
  server_options.registry_dir = config.kubelet_registrar_dir;
  server_options.pod_uid = config.pod_uid;
  server_options.serve_health = health_tracker != nullptr;
  ASSIGN_OR_RETURN(auto server, kubeletplugin::PluginServer::Create(&driver, server_options));

  std::unique_ptr<DeviceHealthMonitor> health_monitor;
  if (health_tracker) {
    auto report = [&] {
      publisher->Update(desired_resources());
      server->PublishHealth(health_tracker->HealthList());
    };
    absl::StatusOr<std::unique_ptr<DeviceHealthMonitor>> monitor =
        nvml_library == nullptr ? absl::FailedPreconditionError("NVML is not usable")
                                : DeviceHealthMonitor::Start(nvml_library.get(), inventory,
                                                             health_tracker.get(), report, {});
    if (monitor.ok()) {
      health_monitor = *std::move(monitor);
    } else {
      DRA_WARNING("device health monitoring is not possible; devices are marked unmonitored", "err",
                  monitor.status());
      std::vector<std::string> all;
      for (const auto& h : health_tracker->HealthList()) all.push_back(h.device_name);
      health_tracker->OnUnmonitored(all, std::string(monitor.status().message()), absl::Now());
    }
    report();
  }

  std::unique_ptr<metrics::HttpServer> http;
  if (!config.http_endpoint.empty()) {
    std::map<std::string, metrics::HttpHandler> handlers;
    if (!config.metrics_path.empty()) {
      handlers[config.metrics_path] = [&registry] {
        return metrics::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8",
                                     registry.Render()};
      };
    }
    handlers["/healthz"] = [] { return metrics::HttpResponse{200, "text/plain", "ok"}; };
    ASSIGN_OR_RETURN(http, metrics::HttpServer::Start(config.http_endpoint, handlers));
    DRA_INFO("serving metrics", "endpoint", config.http_endpoint, "path", config.metrics_path);
  }

  std::unique_ptr<HealthServer> health;
  if (config.healthcheck_port >= 0) {
    ASSIGN_OR_RETURN(health,
                     HealthServer::Start(config.healthcheck_port, server->dra_socket_path()));
    DRA_INFO("serving gRPC health", "port", health->port());
  }

  Cleanup cleanup(claim_api.get(), checkpoint.get(), cdi.get(), &state, &driver);
  // Waits for the next pass: the interval, or sooner when a corrupt checkpoint asks for one.
  // True at shutdown.
  auto wait_for_next_pass = [&] {
    const absl::Time deadline = absl::Now() + config.cleanup_interval;
    while (absl::Now() < deadline) {
      if (signals->WaitForShutdown(std::min(absl::Seconds(1), deadline - absl::Now()))) {
        return true;
      }
      if (cleanup_now.exchange(false)) return false;
    }
    return false;
  };
  std::thread cleaner([&] {
    do {
      absl::Status s = cleanup.RunOnce();
      if (!s.ok()) DRA_WARNING("checkpoint cleanup incomplete; retrying later", "err", s);
    } while (!wait_for_next_pass());
  });

  DRA_INFO("gpu-kubelet-plugin running", "node", config.node_name, "driver", kDriverName);
  signals->WaitForShutdown();
  DRA_INFO("shutting down", "signal", signals->shutdown_signal());
  if (health) health->Stop();
  if (health_monitor) health_monitor->Stop();
  server->Stop();  // removes our sockets: the kubelet sees the plugin go away
  publisher->Stop();
  cleaner.join();
  if (http) http->Stop();
  return absl::OkStatus();
}

}  // namespace dra::gpu
