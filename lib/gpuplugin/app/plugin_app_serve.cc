// PluginApp's serving half: the kubelet socket, device health and the cleanup pass, through the
// host (plugin_host.h); start-up is in plugin_app.cc.

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/app/plugin_app.h"
#include "lib/gpuplugin/app/plugin_app_parts.h"
#include "lib/gpuplugin/app/plugin_metrics.h"

namespace dra::gpu {

absl::Status PluginApp::ServeKubelet() {
  Parts& p = *parts_;
  kubeletplugin::PluginServerOptions options;
  options.trace_calls = config_.prepare_trace;
  if (config_.claim_informer) {
    metrics::Family<metrics::Counter>* lookups = AddClaimCacheLookupsMetric(p.host->registry());
    p.claim_cache = std::make_unique<kubeletplugin::ClaimCache>(kubeletplugin::ClaimCache::Options{
        .driver_name = kDriverName,
        .node_name = config_.node_name,
        .on_lookup = [lookups](kubeletplugin::ClaimCache::Result r) {
          lookups->WithLabels({kubeletplugin::ClaimCache::ResultName(r)})->Inc();
        }});
    p.claim_cache->Start(p.host->client());
    options.claim_lookup = p.claim_cache.get();
  }
  options.serve_health = p.health_tracker != nullptr;
  ASSIGN_OR_RETURN(p.server, p.host->ServeKubelet(p.driver.get(), std::move(options)));
  return absl::OkStatus();
}

void PluginApp::StartHealthMonitor() {
  Parts& p = *parts_;
  if (!p.health_tracker) return;
  auto report = [this, &p] {
    p.publisher->Update(p.DesiredResources(config_.node_name));
    p.server->PublishHealth(p.health_tracker->HealthList());
  };
  DeviceHealthMonitor::Options options;
  // PassthroughSupport: the GPUs of held VFIO devices are on vfio-pci (or about to be, or not yet
  // back): not watched (device_health.h). The held set is updated at every checkpoint write,
  // before a bind and after the rebind to nvidia.
  if (p.vfio) {
    options.paused_gpus = [&p] {
      absl::MutexLock lock(&p.held_mu);
      return VfioHeldGpus(p.inventory, p.held);
    };
  }
  // A recovered device (device_health.h): a metric and a Normal event on the Node.
  options.on_recovered = [this, &p](const std::string& device, absl::Duration unhealthy_for) {
    p.health_recoveries->WithLabels({device})->Inc();
    p.host->PostNodeEvent(
        "Normal", "DeviceHealthRecovered",
        absl::StrCat("device ", device, " is healthy again after ",
                     absl::FormatDuration(unhealthy_for), ": no critical XID for ",
                     absl::FormatDuration(config_.health_recovery_quiet_period),
                     " and NVML answers; its taint was removed"));
  };
  absl::StatusOr<std::unique_ptr<DeviceHealthMonitor>> monitor =
      p.nvml_library == nullptr
          ? absl::FailedPreconditionError("NVML is not usable")
          : DeviceHealthMonitor::Start(p.nvml_library.get(), p.inventory, p.health_tracker.get(),
                                       report, std::move(options));
  if (monitor.ok()) {
    p.health_monitor = *std::move(monitor);
  } else {
    DRA_WARNING("device health monitoring is not possible; devices are marked unmonitored", "err",
                monitor.status());
    std::vector<std::string> all;
    for (const auto& h : p.health_tracker->HealthList()) all.push_back(h.device_name);
    p.health_tracker->OnUnmonitored(all, std::string(monitor.status().message()), absl::Now());
  }
  report();
}

void PluginApp::StartCleanup() {
  Parts& p = *parts_;
  p.cleanup = std::make_unique<Cleanup>(p.claim_api.get(), p.checkpoint, p.cdi.get(), p.state.get(),
                                        p.driver.get());
  p.host->StartCleanup([&p] {
    absl::Status s = p.cleanup->RunOnce();
    if (!s.ok()) DRA_WARNING("checkpoint cleanup incomplete; retrying later", "err", s);
  });
}

absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals) {
  return kubeletplugin::RunUntilShutdown<PluginApp>(config, signals);
}

}  // namespace dra::gpu
