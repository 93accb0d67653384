#include "lib/gpuplugin/app/plugin_app.h"

#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "lib/api/consumable_shares.h"
#include "lib/api/driver_gates.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/stack_dump.h"
#include "lib/common/status.h"
#include "lib/driverroot/driver_root.h"
#include "lib/gpuplugin/app/plugin_app_parts.h"
#include "lib/gpuplugin/app/plugin_metrics.h"
#include "lib/gpuplugin/fabric/fabric_step.h"
#include "lib/gpuplugin/health/device_health.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/inventory/partitionable_slices.h"
#include "lib/gpuplugin/inventory/slices.h"
#include "lib/gpuplugin/mig/mig_manager.h"
#include "lib/gpuplugin/mps/mps_sharing.h"
#include "lib/gpuplugin/prepare/claim_cdi.h"
#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/prepare/cleanup.h"
#include "lib/gpuplugin/prepare/device_metadata.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/gpuplugin/prepare/driver.h"
#include "lib/gpuplugin/prepare/rebuild.h"
#include "lib/gpuplugin/record/go_prepared.h"
#include "lib/gpuplugin/status/device_status.h"
#include "lib/gpuplugin/status/device_status_queue.h"
#include "lib/gpuplugin/timeslicing/nvidia_smi.h"
#include "lib/gpuplugin/timeslicing/time_slicing.h"
#include "lib/gpuplugin/vfio/vfio_claim.h"
#include "lib/gpuplugin/vfio/vfio_setup.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/httpserver/metrics_endpoint.h"
#include "lib/k8s/client.h"
#include "lib/k8s/events.h"
#include "lib/k8s/objects_core.h"
#include "lib/kubeletplugin/claim_cache.h"
#include "lib/kubeletplugin/claim_source.h"
#include "lib/kubeletplugin/health_server.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/slice_publisher.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {
namespace {

// NVML discovery; a missing library or driver leaves the node without devices (degraded).
// The loaded library is kept in `nvml` for the device health monitor.
absl::StatusOr<Inventory> DiscoverInventory(const PluginConfig& config,
                                            const driverroot::DriverRoot& root,
                                            std::unique_ptr<nvml::Nvml>& nvml) {
  ASSIGN_OR_RETURN(nvml, nvml::Nvml::Create(root.root()));
  ASSIGN_OR_RETURN(nvml::Session session, nvml->Open());
  return Discover(
      session,
      {.sysfs_root = config.sys_root,
       .list_type_attributes =
           config.gates != nullptr && config.gates->Enabled("DRAListTypeAttributes"),
       .dynamic_mig = config.gates != nullptr && config.gates->Enabled(api::gate::kDynamicMIG),
       .module_ids = config.gates != nullptr &&
                     config.gates->Enabled(api::gate::kFabricManagerPartitioning)});
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

// The most a SIGTERM shutdown waits for the queued device status writes (one write's timeout,
// kDeviceStatusWriteTime, twice); the kubelet plugin's pod has a termination grace period of 30 s.
constexpr absl::Duration kDeviceStatusDrainTime = absl::Seconds(10);

// At startup: the entries of every completed claim whose record holds them are written again, so
// that a write queued but lost in a crash comes back (device_status_queue.h). Writing entries
// that are already there changes nothing but their Ready condition's lastTransitionTime.
void RequeueDeviceStatus(const checkpoint::ClaimMap& claims, const DeviceStatusQueue& queue) {
  int queued = 0;
  for (const auto& [uid, claim] : claims) {
    if (claim.state != checkpoint::ClaimState::kPrepareCompleted) continue;
    for (const prepare::StepRecord& r : RecordedSteps(claim, /*time_slicing_gate=*/false)) {
      if (r.name != kDeviceStatusStep || r.state != prepare::StepState::kApplied) continue;
      absl::StatusOr<DeviceStatusRecord> record = DeviceStatusRecordFromJson(r.undo);
      if (!record.ok() || !record->entries) continue;  // an older record: written back then
      if (queue.Write(record->claim, *record->entries).ok()) ++queued;
    }
  }
  if (queued > 0) DRA_INFO("queued the prepared claims' device status again", "claims", queued);
}

}  // namespace

PluginApp::PluginApp(const PluginConfig& config, SignalHandler* signals)
    : config_(config), signals_(signals), parts_(std::make_unique<Parts>()) {
  parts_->host = std::make_unique<kubeletplugin::PluginHost>(
      config,
      kubeletplugin::PluginHost::Options{
          .driver_name = kDriverName, .component = kPluginComponent, .stack_dump_on_usr2 = true},
      signals);
}

PluginApp::~PluginApp() { Stop(); }

absl::StatusOr<std::unique_ptr<PluginApp>> PluginApp::Start(const PluginConfig& config,
                                                            SignalHandler* signals) {
  std::unique_ptr<PluginApp> app(new PluginApp(config, signals));
  RETURN_IF_ERROR(app->CheckConfig());
  RETURN_IF_ERROR(app->ConnectToApiServer());
  RETURN_IF_ERROR(app->DiscoverDevices());
  RETURN_IF_ERROR(app->OpenCheckpoint());
  RETURN_IF_ERROR(app->BuildDeviceState());
  app->RecoverCheckpoint();
  RETURN_IF_ERROR(app->PublishSlices());
  RETURN_IF_ERROR(app->ServeKubelet());
  app->StartHealthMonitor();
  RETURN_IF_ERROR(app->parts_->host->ServeHttpAndHealthPort());
  app->StartCleanup();
  // Discovery, the slices and the claim list are done with: give their freed heap back.
  malloc_trim(0);
  DRA_INFO("gpu-kubelet-plugin running", "node", config.node_name, "driver", kDriverName);
  return app;
}

void PluginApp::Stop() {
  if (stopped_) return;
  stopped_ = true;
  Parts& p = *parts_;
  p.host->Stop(
      {.before_server_stop =
           [&p] {
             if (p.health_monitor) p.health_monitor->Stop();
           },
       .after_server_stop =
           [&p] {
             p.server = nullptr;  // released by the host at the end of its Stop
             if (p.claim_cache) p.claim_cache->Stop();
             // No kubelet call adds to the queue any more: write what waits, within the deadline.
             if (p.device_status) p.device_status->Shutdown(kDeviceStatusDrainTime);
           }},
      // The claim specs (k8s.gpu.nvidia.com-claim_*) and device-metadata specs (gpu.nvidia.com_*).
      {.cdi_prefixes = {absl::StrCat("k8s.", kDriverName, "-"), absl::StrCat(kDriverName, "_")}});
}

absl::Status PluginApp::CheckConfig() {
  if (config_.health_recovery_quiet_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health-recovery-quiet-period (HEALTH_RECOVERY_QUIET_PERIOD): ",
                     absl::FormatDuration(config_.health_recovery_quiet_period),
                     " is negative; allowed: a duration >= 0 (0 disables health recovery)"));
  }
  if (config_.gates != nullptr && config_.gates->Enabled(api::gate::kMPSSupport) &&
      config_.image_name.empty()) {
    return absl::InvalidArgumentError(
        "--image-name is required when the feature gate MPSSupport is enabled (the image of the "
        "MPS control daemon pods)");
  }
  FeatureGates no_gates;
  ASSIGN_OR_RETURN(parts_->shares, api::ParseConsumableShares(
                                       config_.consumable_shares,
                                       config_.gates != nullptr ? *config_.gates : no_gates));
  return parts_->host->MakeDirectories();
}

absl::Status PluginApp::ConnectToApiServer() {
  Parts& p = *parts_;
  RETURN_IF_ERROR(p.host->ConnectToApiServer());
  ASSIGN_OR_RETURN(p.status_client, k8s::Client::Create(p.host->rest_config(),
                                                        {.qps = config_.kube_api_qps,
                                                         .burst = config_.kube_api_burst,
                                                         .max_retries = 0,
                                                         .request_timeout = kDeviceStatusWriteTime,
                                                         .field_manager = DeviceStatusFieldManager(
                                                             kDriverName, config_.node_name)}));
  const GpuPluginMetrics m = AddGpuPluginMetrics(p.host->registry());
  p.degraded = m.degraded;
  p.device_status_api =
      DeviceStatusWriterFromClient(p.status_client.get(), kDriverName, m.status_writes);
  p.device_status = std::make_unique<DeviceStatusQueue>(
      p.device_status_api.get(), DeviceStatusQueueOptions{}, m.status_queue_depth, m.status_writes);
  p.device_status->Start();
  p.health_recoveries = m.health_recoveries;
  return absl::OkStatus();
}

absl::Status PluginApp::DiscoverDevices() {
  Parts& p = *parts_;
  ASSIGN_OR_RETURN(p.root, driverroot::DriverRoot::Create({.root = config_.container_driver_root,
                                                           .host_root = config_.nvidia_driver_root,
                                                           .dev_root = config_.dev_root,
                                                           .proc_root = config_.proc_root,
                                                           .proc_devices = config_.alt_proc_devices,
                                                           .sys_root = config_.sys_root}));
  auto discovered = DiscoverInventory(config_, *p.root, p.nvml_library);
  if (!discovered.ok()) {
    DRA_WARNING("no usable NVML: publishing no devices, serving unprepare only", "err",
                discovered.status());
    p.degraded->WithLabels({"nvml"})->Set(1);
    p.host->PostNodeEvent("Warning", "NVMLUnavailable", std::string(discovered.status().message()));
    return absl::OkStatus();
  }
  p.inventory = std::move(*discovered);
  if (config_.gates != nullptr && config_.gates->Enabled(api::gate::kPassthroughSupport)) {
    ASSIGN_OR_RETURN(
        p.vfio, VfioRuntime::Create(config_.host_root, config_.nvidia_driver_root, p.inventory));
  }
  RETURN_IF_ERROR(SetUpFabricManager());
  if (!p.inventory.counter_sets.empty()) {
    absl::StatusOr<std::string> version = p.host->client()->GetRaw("/version");
    if (!version.ok()) return Annotate(version.status(), "read the API server's /version");
    ASSIGN_OR_RETURN(p.partitionable_layout, SliceLayoutFromVersionJson(*version));
    DRA_INFO("DynamicMIG: publishing partitionable devices", "counterSets",
             p.inventory.counter_sets.size(), "layout",
             *p.partitionable_layout == SliceLayout::kSplit ? "split" : "combined");
  }
  DRA_INFO("discovered devices", "node", config_.node_name, "devices", p.inventory.devices.size(),
           "driverVersion", p.inventory.driver_version);
  // Hardware that degraded the node (a lost GPU, a capacity NVML does not report): each was
  // logged by discovery; the Node event makes it visible to the cluster's operators.
  if (!p.inventory.left_out.empty()) {
    p.host->PostNodeEvent(
        "Warning", "DevicesLeftOut",
        absl::StrCat("not published: ", absl::StrJoin(p.inventory.left_out, "; ")));
  }
  return absl::OkStatus();
}

absl::Status PluginApp::SetUpFabricManager() {
  Parts& p = *parts_;
  if (config_.gates == nullptr || !config_.gates->Enabled(api::gate::kFabricManagerPartitioning)) {
    return absl::OkStatus();
  }
  if (!fm::HasFabricManagerFabric(config_.host_root)) {
    DRA_INFO("FabricManagerPartitioning: no NVLink fabric under the host root; partitions off",
             "hostRoot", config_.host_root);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<fm::NvfmLibrary>> library =
      fm::NvfmLibrary::Open(config_.container_driver_root, fm::ConnectOptionsFromEnv());
  if (!library.ok()) {
    return Annotate(library.status(), "FabricManagerPartitioning: load the Fabric Manager library");
  }
  p.fabric_manager = *std::move(library);
  absl::StatusOr<FabricPartitioning> fabric =
      LoadFabricPartitioning(p.fabric_manager.get(), p.inventory);
  if (!fabric.ok()) {
    return Annotate(fabric.status(), "FabricManagerPartitioning: list the fabric partitions");
  }
  p.fabric = std::make_unique<FabricPartitioning>(*std::move(fabric));
  AddFabricAttributes(p.inventory, *p.fabric);
  DRA_INFO("FabricManagerPartitioning: fabric partitions found", "partitions",
           p.fabric->partitions.size(), "gpusWithModuleId", p.fabric->module_by_bus_id.size(),
           "library", p.fabric_manager->library_path());
  return absl::OkStatus();
}

absl::Status PluginApp::OpenCheckpoint() {
  Parts& p = *parts_;
  kubeletplugin::PluginHost::CheckpointPolicy policy;
  // A corrupt checkpoint is replaced by an empty one; the records of claims still in use are then
  // rebuilt from their CDI specs and the API server (rebuild.h): at startup before serving
  // (RebuildFromCdiSpecs), and at any later read by a cleanup pass started at once.
  policy.rebuild = [this] { return RebuildFromCdiSpecs(); };
  policy.later_outcome =
      "the records of claims still in use on this node are being rebuilt from their CDI specs and "
      "the API server by the cleanup";
  // A node switched from the Go driver: its checkpoint's claims are adopted.
  policy.convert_go_devices = GoDevicesConverter(p.inventory, config_.namespace_name);
  // After a reboot the claims' CDI specs go with their records: nothing may be rebuilt from them
  // (rebuild.h), and the kubelet's prepare after the reboot writes them again.
  policy.on_reboot = RemoveClaimSpecsOnReboot(config_.cdi_root);
  ASSIGN_OR_RETURN(p.checkpoint, p.host->OpenCheckpoint(std::move(policy)));
  return absl::OkStatus();
}

// PassthroughSupport: after each checkpoint write, the slice without the held devices' siblings
// (published asynchronously; before PublishSlices only remembered).
std::function<void(const std::set<std::string>&)> PluginApp::OnHeldDevices() {
  if (!parts_->vfio) return nullptr;
  return [this](const std::set<std::string>& held) {
    Parts& p = *parts_;
    {
      absl::MutexLock lock(&p.held_mu);
      if (p.held == held) return;
      p.held = held;
    }
    if (p.publisher) p.publisher->Update(p.DesiredResources(config_.node_name));
  };
}

absl::Status PluginApp::BuildDeviceState() {
  Parts& p = *parts_;
  auto cdi = ClaimCdi::Create(p.root.get(), config_.cdi_root, p.inventory.driver_version);
  if (!cdi.ok()) {
    DRA_WARNING("driver files not found; CDI specs will carry device nodes only", "err",
                cdi.status());
    p.degraded->WithLabels({"driver-files"})->Set(1);
    cdi = ClaimCdi::CreateWithCommonEdits(p.root.get(), config_.cdi_root, {});
  }
  if (!cdi.ok()) return cdi.status();
  p.cdi = std::move(*cdi);
  p.nvidia_smi = std::make_unique<NvidiaSmi>(p.root.get(), config_.nvidia_smi_timeout);
  p.time_slicing = std::make_unique<TimeSlicing>(p.nvidia_smi.get());
  // Also without the gate: unprepare stops the daemons a checkpoint records. Its API calls fail
  // fast like the claim GETs, inside the kubelet's timeouts.
  p.mps = MpsDaemons::Real(
      MpsEnv(config_, p.host->plugin_dir(), p.host->claim_client(), p.nvidia_smi.get()));
  p.metadata = std::make_unique<DeviceMetadataFiles>(p.host->plugin_dir(), config_.cdi_root);
  if (p.vfio) p.vfio->SetPersistence(p.nvidia_smi.get());
  // DynamicMIG: one NVML session for the plugin's life (MIG changes go through it, serialized).
  if (config_.gates != nullptr && config_.gates->Enabled(api::gate::kDynamicMIG) &&
      p.nvml_library != nullptr) {
    absl::StatusOr<nvml::Session> session = p.nvml_library->Open();
    if (!session.ok()) return Annotate(session.status(), "DynamicMIG: open the NVML session");
    p.mig_session = std::make_unique<nvml::Session>(*std::move(session));
    p.mig = std::make_unique<MigManager>(p.mig_session.get());
  }
  p.state = std::make_unique<DeviceState>(
      p.inventory, p.cdi.get(), p.checkpoint,
      DeviceState::Options{.pool_name = config_.node_name,
                           .gates = config_.gates,
                           .consumable_shares = p.shares,
                           .services = {.time_slicing = p.time_slicing.get(),
                                        .mps = p.mps.get(),
                                        .device_status = p.device_status.get(),
                                        .metadata = p.metadata.get(),
                                        .mig = p.mig.get(),
                                        .fabric = p.fabric.get()},
                           .write_device_status = config_.device_status,
                           .vfio = p.vfio ? &p.vfio->planning() : nullptr,
                           .on_held_devices = OnHeldDevices()});
  p.driver =
      std::make_unique<GpuDriver>(p.state.get(), p.host->plugin_dir(), p.host->driver_metrics());
  p.claim_api = ClaimApiFromClient(p.host->claim_client(), kDriverName, config_.node_name);
  return absl::OkStatus();
}

std::string PluginApp::RebuildFromCdiSpecs() {
  Parts& p = *parts_;
  absl::StatusOr<SpecReconciliation> rebuilt = ReconcileCdiSpecs(
      *p.claim_api, *p.cdi, *p.checkpoint, *p.state, *p.driver, /*remove_orphans=*/false);
  return rebuilt.ok() ? rebuilt->Summary(/*removed_orphans=*/false)
                      : absl::StrCat("rebuilding from the CDI specs failed (",
                                     rebuilt.status().message(), "); the cleanup tries again");
}

void PluginApp::RecoverCheckpoint() {
  Parts& p = *parts_;
  p.host->FinishCheckpointRecovery();
  if (auto claims = p.checkpoint->List(); claims.ok()) {
    p.state->CountPreparedDevices(*claims);
    if (config_.device_status) RequeueDeviceStatus(*claims, *p.device_status);
  }
  p.driver->RefreshPreparedDevicesGauge();
}

absl::Status PluginApp::PublishSlices() {
  Parts& p = *parts_;
  ASSIGN_OR_RETURN(p.publisher, p.host->CreatePublisher());
  // With NVMLDeviceHealthCheck, devices carry the taints their NVML events imply
  // (docs/compatibility.md "Device health") and the kubelet gets their health through the
  // DRAResourceHealth stream.
  if (config_.gates != nullptr && config_.gates->Enabled(api::gate::kNVMLDeviceHealthCheck)) {
    p.health_tracker = std::make_unique<DeviceHealthTracker>(
        config_.node_name, MonitoredDevices(p.inventory),
        ParseAdditionalIgnoredXids(config_.additional_xids_to_ignore),
        config_.health_recovery_quiet_period);
  }
  p.publisher->Update(p.DesiredResources(config_.node_name));
  if (p.shares.Enabled()) {
    DRA_INFO("consumable shares enabled: devices allow multiple allocations", "mode",
             p.shares.ToString());
  }
  return absl::OkStatus();
}

}  // namespace dra::gpu
