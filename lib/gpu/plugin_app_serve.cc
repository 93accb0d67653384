// PluginApp's serving half: the kubelet socket, device health, metrics and the cleanup thread
// (start-up is in plugin_app.cc).

#include <algorithm>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/gpu/plugin_app.h"
#include "lib/gpu/plugin_app_parts.h"

namespace dra::gpu {

absl::Status PluginApp::ServeKubelet() {
  Parts& p = *parts_;
  kubeletplugin::PluginServerOptions options;
  options.driver_name = kDriverName;
  options.claim_getter = kubeletplugin::ClaimGetterFromClient(p.claim_client.get());
  options.trace_calls = config_.prepare_trace;
  if (config_.claim_informer) {
    metrics::Family<metrics::Counter>* lookups = p.registry.AddCounter(
        "nvidia_dra_claim_cache_lookups_total",
        "Prepare's claim reads by how the claim cache answered: hit (from memory), miss (not "
        "cached) or stale (another UID or no allocation); a miss or stale one is a GET.",
        {"result"});
    p.claim_cache = std::make_unique<kubeletplugin::ClaimCache>(kubeletplugin::ClaimCache::Options{
        .driver_name = kDriverName,
        .node_name = config_.node_name,
        .on_lookup = [lookups](kubeletplugin::ClaimCache::Result r) {
          lookups->WithLabels({kubeletplugin::ClaimCache::ResultName(r)})->Inc();
        }});
    p.claim_cache->Start(p.client.get());
    options.claim_lookup = p.claim_cache.get();
  }
  options.kubelet_plugins_dir = config_.kubelet_plugins_dir;
  options.registry_dir = config_.kubelet_registrar_dir;
  options.pod_uid = config_.pod_uid;
  options.serve_health = p.health_tracker != nullptr;
  ASSIGN_OR_RETURN(p.server, kubeletplugin::PluginServer::Create(p.driver.get(), options));
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
  // A recovered device (device_health.h): a metric and a Normal event on the Node.
  options.on_recovered = [this, &p](const std::string& device, absl::Duration unhealthy_for) {
    p.health_recoveries->WithLabels({device})->Inc();
    (void)k8s::PostEvent(p.client.get(), p.node_ref, "Normal", "DeviceHealthRecovered",
                         absl::StrCat("device ", device, " is healthy again after ",
                                      absl::FormatDuration(unhealthy_for), ": no critical XID for ",
                                      absl::FormatDuration(config_.health_recovery_quiet_period),
                                      " and NVML answers; its taint was removed"),
                         kPluginComponent, config_.node_name);
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

absl::Status PluginApp::ServeHttpAndHealthPort() {
  Parts& p = *parts_;
  ASSIGN_OR_RETURN(p.http, metrics::StartMetricsEndpoint(config_.http_endpoint,
                                                         config_.metrics_path, &p.registry));
  if (config_.healthcheck_port >= 0) {
    // Healthy (the pod Ready) only once the kubelet has registered this instance.
    ASSIGN_OR_RETURN(
        p.health, kubeletplugin::HealthServer::StartFor(config_.healthcheck_port, p.server.get()));
    DRA_INFO("serving gRPC health", "port", p.health->port());
  }
  return absl::OkStatus();
}

void PluginApp::StartCleanup() {
  Parts& p = *parts_;
  p.cleanup = std::make_unique<Cleanup>(p.claim_api.get(), p.checkpoint.get(), p.cdi.get(),
                                        p.state.get(), p.driver.get());
  // Waits for the next pass: the interval, or sooner when a corrupt checkpoint asks for one.
  // True at shutdown.
  auto wait_for_next_pass = [this, &p] {
    const absl::Time deadline = absl::Now() + config_.cleanup_interval;
    while (absl::Now() < deadline) {
      if (signals_->WaitForShutdown(std::min(absl::Seconds(1), deadline - absl::Now()))) {
        return true;
      }
      if (p.stopping) return true;
      if (p.cleanup_now.exchange(false)) return false;
    }
    return p.stopping.load();
  };
  p.cleaner = std::thread([&p, wait_for_next_pass] {
    do {
      absl::Status s = p.cleanup->RunOnce();
      if (!s.ok()) DRA_WARNING("checkpoint cleanup incomplete; retrying later", "err", s);
    } while (!wait_for_next_pass());
  });
}

absl::Status RunPlugin(const PluginConfig& config, SignalHandler* signals) {
  ASSIGN_OR_RETURN(std::unique_ptr<PluginApp> app, PluginApp::Start(config, signals));
  signals->WaitForShutdown();
  DRA_INFO("shutting down", "signal", signals->shutdown_signal());
  app->Stop();
  return absl::OkStatus();
}

}  // namespace dra::gpu
