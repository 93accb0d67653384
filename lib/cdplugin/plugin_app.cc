#include "lib/cdplugin/plugin_app.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/driver_gates.h"
#include "lib/cdi/version.h"
#include "lib/cdplugin/cdi_specs.h"
#include "lib/cdplugin/cleanup.h"
#include "lib/cdplugin/clique_id.h"
#include "lib/cdplugin/device_state.h"
#include "lib/cdplugin/domain_api.h"
#include "lib/cdplugin/driver.h"
#include "lib/cdplugin/host_imex.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/cdplugin/slices.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/driverroot/device_nodes.h"
#include "lib/driverroot/driver_root.h"
#include "lib/k8s/client.h"
#include "lib/k8s/events.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/wire_decode.h"
#include "lib/kubeletplugin/claim_source.h"
#include "lib/kubeletplugin/plugin_host.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/slice_publisher.h"
#include "lib/kubeletplugin/stale_sockets.h"
#include "lib/nvml/nvml.h"

namespace dra::cdplugin {
namespace {

constexpr char kComponent[] = "compute-domain-kubelet-plugin";

}  // namespace

struct PluginApp::Parts {
  // First, so that it goes last: the parts below use its clients, checkpoint and registry; its
  // Stop releases the servers that point into the parts.
  std::unique_ptr<kubeletplugin::PluginHost> host;
  std::unique_ptr<driverroot::DriverRoot> root;
  std::unique_ptr<nvml::Nvml> nvml;  // kept for the clique ID refresh
  std::string driver_version;
  std::string clique_id;
  int64_t channels_major = 0;
  checkpoint::Checkpoint* checkpoint = nullptr;  // the host's
  std::unique_ptr<CdiSpecs> cdi;
  std::unique_ptr<HostImex> host_imex;  // hostManaged only
  std::unique_ptr<KubeDomainApi> domains;
  std::unique_ptr<DeviceState> state;
  std::unique_ptr<CdDriver> driver;
  kubeletplugin::SlicePublisher* publisher = nullptr;  // the host's
  std::unique_ptr<Cleanup> cleanup;
  bool clique_labelled = false;
  bool first_cleanup_pass = true;  // the cleanup thread's
};

PluginApp::PluginApp(const PluginConfig& config, SignalHandler* signals)
    : config_(config), signals_(signals), parts_(std::make_unique<Parts>()) {
  parts_->host = std::make_unique<kubeletplugin::PluginHost>(
      config,
      kubeletplugin::PluginHost::Options{.driver_name = kDriverName, .component = kComponent},
      signals);
}

PluginApp::~PluginApp() { Stop(); }

absl::StatusOr<std::unique_ptr<PluginApp>> PluginApp::Start(const PluginConfig& config,
                                                            SignalHandler* signals) {
  std::unique_ptr<PluginApp> app(new PluginApp(config, signals));
  RETURN_IF_ERROR(app->CheckConfig());
  RETURN_IF_ERROR(app->parts_->host->ConnectToApiServer());
  RETURN_IF_ERROR(app->InspectDriver());
  RETURN_IF_ERROR(app->OpenCheckpointAndCdi());
  RETURN_IF_ERROR(app->StartDomainCache());
  RETURN_IF_ERROR(app->ServeKubelet());
  RETURN_IF_ERROR(app->parts_->host->ServeHttpAndHealthPort());
  app->LabelGpuClique();
  app->StartCleanup();
  DRA_INFO("compute-domain-kubelet-plugin running", "node", config.node_name, "driver", kDriverName,
           "cliqueID", app->parts_->clique_id);
  return app;
}

void PluginApp::Stop() {
  if (stopped_) return;
  stopped_ = true;
  Parts& p = *parts_;
  p.host->Stop({.before_server_stop =
                    [&p] {
                      if (p.driver)
                        p.driver->Shutdown();  // prepares waiting for a daemon return now
                    },
                .after_cleanup_stop =
                    [this, &p] {
                      RemoveCliqueLabel();
                      if (p.domains) p.domains->Stop();
                    }},
               // The claim specs and the base spec; aborted records hold nothing.
               {.cdi_prefixes = {absl::StrCat("k8s.", kDriverName, "-")},
                .holds_files = [](const checkpoint::PreparedClaim& c) {
                  absl::StatusOr<ClaimRecord> r = DecodeRecord(c);
                  return !(r.ok() && r->phase == Phase::kAborted);
                }});
}

void PluginApp::RemoveCliqueLabel() {
  Parts& p = *parts_;
  if (!p.clique_labelled || !p.domains) return;
  // The node's other plugin instance (the new pod of a surge rollout, registered before this
  // old one is stopped) set the same label at its start and needs it: it stays.
  const kubeletplugin::PluginServer* server = p.host->server();
  std::vector<std::string> others = kubeletplugin::LiveSockets(
      {.dir = config_.kubelet_registrar_dir,
       .prefix = absl::StrCat(kDriverName, "-"),
       .suffix = "-reg.sock",
       .keep = server != nullptr ? server->registration_socket_path() : std::string()});
  if (!others.empty()) {
    DRA_INFO(
        "keeping the GPU clique node label: another instance of the driver serves on this "
        "node",
        "label", kGpuCliqueLabel, "registration_socket", others.front());
    return;
  }
  if (absl::Status s = p.domains->PatchNodeLabel(kGpuCliqueLabel, ""); !s.ok()) {
    DRA_WARNING("removing the GPU clique node label failed", "label", kGpuCliqueLabel, "err", s);
  }
}

absl::Status PluginApp::CheckConfig() {
  if (config_.imex_mode == "hostManaged" && !config_.GateOn(api::gate::kHostManagedIMEXDaemon)) {
    return absl::InvalidArgumentError(
        "--imex-mode=hostManaged requires the feature gate HostManagedIMEXDaemon");
  }
  if (config_.imex_mode != "driverManaged" && config_.imex_mode != "hostManaged") {
    return absl::InvalidArgumentError(absl::StrCat("--imex-mode: unknown value \"",
                                                   config_.imex_mode,
                                                   "\" (allowed: driverManaged, hostManaged)"));
  }
  if (config_.imex_isolation == "channel") {
    return absl::InvalidArgumentError("--imex-isolation=channel is not supported yet");
  }
  if (!config_.imex_isolation.empty() && config_.imex_isolation != "domain") {
    return absl::InvalidArgumentError(absl::StrCat("--imex-isolation: unknown value \"",
                                                   config_.imex_isolation,
                                                   "\" (allowed: domain, channel)"));
  }
  return parts_->host->MakeDirectories();
}

absl::Status PluginApp::InspectDriver() {
  Parts& p = *parts_;
  ASSIGN_OR_RETURN(p.root,
                   driverroot::DriverRoot::Create({.root = config_.container_driver_root,
                                                   .host_root = config_.nvidia_driver_root,
                                                   .dev_root = config_.dev_root,
                                                   .proc_root = config_.proc_root,
                                                   .proc_devices = config_.alt_proc_devices}));
  ASSIGN_OR_RETURN(p.nvml, nvml::Nvml::Create(p.root->root()));
  {
    ASSIGN_OR_RETURN(nvml::Session session, p.nvml->Open());
    ASSIGN_OR_RETURN(p.driver_version, session.DriverVersion());
  }
  // The driver's own IMEX daemons always address each other by DNS names (the gate registry
  // refuses IMEXDaemonsWithDNSNames=false); a host-managed IMEX daemon is not ours to check.
  if (!host_managed() && cdi::CompareVersions(p.driver_version, kMinDriverVersionForDnsNames) < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NVIDIA driver ", p.driver_version, " is older than ", kMinDriverVersionForDnsNames,
        ", the oldest whose IMEX daemon works with DNS names (the only IMEX daemon addressing "
        "of this version); upgrade the driver"));
  }
  absl::StatusOr<std::string> clique =
      DiscoverCliqueId(*p.nvml, config_.GateOn(api::gate::kCrashOnNVLinkFabricErrors));
  if (!clique.ok()) return Annotate(clique.status(), "determine the NVLink clique ID");
  p.clique_id = *clique;
  absl::StatusOr<int64_t> major = driverroot::CharDeviceMajor(*p.root, "nvidia-caps-imex-channels");
  if (!major.ok()) {
    return Annotate(major.status(),
                    absl::StrCat("IMEX channel device major (", p.root->proc_devices(), ")"));
  }
  p.channels_major = *major;
  DRA_INFO("driver inspected", "version", p.driver_version, "cliqueID",
           p.clique_id.empty() ? "(none: no multi-node NVLink)" : p.clique_id, "imexChannelsMajor",
           p.channels_major);
  return absl::OkStatus();
}

absl::Status PluginApp::OpenCheckpointAndCdi() {
  Parts& p = *parts_;
  // The specs first: after a reboot the claims' specs go with their records.
  ASSIGN_OR_RETURN(p.cdi, CdiSpecs::Create(config_.cdi_root));
  kubeletplugin::PluginHost::CheckpointPolicy policy;
  policy.on_reboot = RemoveClaimSpecsOnReboot(p.cdi.get());
  // A corrupt checkpoint: the policy of both plugins (plugin_host.h), without a rebuild: what a
  // compute-domain claim's record holds (its phase, its daemon's or channel's state) is not in
  // its CDI spec. The kubelet's unprepare of such a claim finds no record and succeeds; a later
  // cleanup pass removes the directories of ComputeDomains that are gone.
  policy.later_outcome = "compute-domain claims prepared before are no longer known";
  ASSIGN_OR_RETURN(p.checkpoint, p.host->OpenCheckpoint(std::move(policy)));
  // Nothing to rebuild, so the event goes out now rather than after the ComputeDomain informer's
  // first list (which may fail; the next start would not see the corruption again).
  p.host->FinishCheckpointRecovery();
  ASSIGN_OR_RETURN(std::string base, p.cdi->WriteBaseSpec(*p.root));
  DRA_INFO("wrote the base CDI spec", "path", base);
  return absl::OkStatus();
}

absl::Status PluginApp::StartDomainCache() {
  Parts& p = *parts_;
  p.domains =
      std::make_unique<KubeDomainApi>(p.host->client(), config_.node_name, config_.namespace_name);
  RETURN_IF_ERROR(p.domains->Start(config_.informer_sync_timeout));
  if (host_managed()) {
    p.host_imex = std::make_unique<HostImex>(p.root.get(), config_.imex_host_socket_path);
    DRA_INFO("IMEX mode hostManaged: channel claims need the host's IMEX daemon READY", "socket",
             p.host_imex->SocketPath());
  }
  p.state =
      std::make_unique<DeviceState>(DeviceStateOptions{.node_name = config_.node_name,
                                                       .driver_namespace = config_.namespace_name,
                                                       .plugin_dir = p.host->plugin_dir(),
                                                       .clique_id = p.clique_id,
                                                       .imex_channels_major = p.channels_major,
                                                       .root = p.root.get(),
                                                       .host_imex = p.host_imex.get()},
                                    p.checkpoint, p.cdi.get(), p.domains.get());
  p.driver = std::make_unique<CdDriver>(p.state.get(), p.host->driver_metrics());
  p.driver->RefreshPreparedDevicesGauge();
  return absl::OkStatus();
}

absl::Status PluginApp::ServeKubelet() {
  Parts& p = *parts_;
  ASSIGN_OR_RETURN(p.publisher, p.host->CreatePublisher());
  // hostManaged: no daemon of ours to wait for; the prepare asks the host's IMEX daemon.
  bool binding_conditions = config_.binding_conditions && !host_managed();
  p.publisher->Update(
      PublishedResources(config_.node_name, /*with_daemon=*/!host_managed(), binding_conditions));
  if (binding_conditions && !ServerKeepsBindingConditions()) {
    // An API server without DRADeviceBindingConditions drops the fields; publishing them again
    // would rewrite the slice on every sync. The prepare still waits for the daemon (the path
    // without binding conditions), so nothing else changes.
    binding_conditions = false;
    p.publisher->Update(PublishedResources(config_.node_name, /*with_daemon=*/!host_managed(),
                                           /*binding_conditions=*/false));
  }
  DRA_INFO(binding_conditions
               ? "publishing channel-0 with device binding conditions: the scheduler binds a "
                 "workload once the controller reports its node's IMEX daemon Ready"
               : "publishing channel-0 without device binding conditions: a workload is bound at "
                 "once and its prepare waits for the IMEX daemon",
           "bindingConditions", binding_conditions);
  kubeletplugin::PluginServerOptions options;
  // Prepares depend on each other (a channel claim waits for the daemon claim of this node,
  // prepared in another kubelet call): they must not be serialized. DeviceState locks per claim.
  options.serialize = false;
  return p.host->ServeKubelet(p.driver.get(), std::move(options)).status();
}

bool PluginApp::ServerKeepsBindingConditions() {
  Parts& p = *parts_;
  if (absl::Status s = p.publisher->WaitForSync(absl::Seconds(30)); !s.ok()) {
    DRA_WARNING("publishing the ResourceSlice did not finish; keeping the binding conditions",
                "err", s);
    return true;
  }
  k8s::ListOptions options{.field_selector = absl::StrCat("spec.driver=", kDriverName,
                                                          ",spec.nodeName=", config_.node_name)};
  absl::StatusOr<k8s::ListPage> slices =
      p.host->client()->ListAllOf(k8s::ResourceSlice::kResource, "", options);
  if (!slices.ok()) {
    DRA_WARNING("reading back the ResourceSlice failed; keeping the binding conditions", "err",
                slices.status());
    return true;
  }
  for (const nlohmann::json& item : slices->items) {
    absl::StatusOr<k8s::ResourceSlice> slice = k8s::ResourceSlice::FromJson(item);
    if (!slice.ok()) continue;
    for (const k8s::Device& d : slice->spec.devices) {
      if (d.name != "channel-0") continue;
      if (!d.binding_conditions.empty()) return true;
      DRA_WARNING(
          "the API server dropped the binding conditions of channel-0 (feature gates "
          "DRADeviceBindingConditions / DRAResourceClaimDeviceStatus off): publishing it without "
          "them; workload pods are bound at once and their prepare waits for the IMEX daemon",
          "slice", slice->metadata.name);
      return false;
    }
  }
  return true;
}

void PluginApp::LabelGpuClique() {
  Parts& p = *parts_;
  const std::string clique = p.state->clique_id();
  if (!config_.gpu_clique_label_enabled || clique.empty()) return;
  if (absl::Status s = p.domains->PatchNodeLabel(kGpuCliqueLabel, clique); !s.ok()) {
    DRA_WARNING("setting the GPU clique node label failed", "label", kGpuCliqueLabel, "err", s);
    return;
  }
  p.clique_labelled = true;
}

void PluginApp::RefreshCliqueId() {
  Parts& p = *parts_;
  absl::StatusOr<std::string> clique =
      DiscoverCliqueId(*p.nvml, config_.GateOn(api::gate::kCrashOnNVLinkFabricErrors));
  if (!clique.ok()) {
    DRA_WARNING("rediscovering the NVLink clique ID failed; keeping the current one", "current",
                p.state->clique_id(), "err", clique.status());
    return;
  }
  if (!p.state->SetCliqueId(*clique)) return;
  if (config_.gpu_clique_label_enabled) LabelGpuClique();
}

void PluginApp::StartCleanup() {
  Parts& p = *parts_;
  p.cleanup = std::make_unique<Cleanup>(p.state.get(), p.checkpoint, p.domains.get());
  p.host->StartCleanup([this, &p] {
    if (absl::Status s = p.cleanup->RunCheckpointPass(); !s.ok()) {
      DRA_WARNING("checkpoint cleanup incomplete; retrying later", "err", s);
    }
    // Directories only from the second pass on: a domain created just before a plugin restart
    // may not be in a fresh cache yet.
    const bool first = p.first_cleanup_pass;
    p.first_cleanup_pass = false;
    if (!first) RefreshCliqueId();
    if (!first && p.domains->synced()) {
      if (absl::Status s = p.cleanup->RemoveStaleDomainDirs(); !s.ok()) {
        DRA_WARNING("stale domain directory cleanup failed", "err", s);
      }
    }
    p.driver->RefreshPreparedDevicesGauge();
  });
}

absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals) {
  return kubeletplugin::RunUntilShutdown<PluginApp>(config, signals);
}

}  // namespace dra::cdplugin
