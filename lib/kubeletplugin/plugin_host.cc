#include "lib/kubeletplugin/plugin_host.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/atomic_file.h"
#include "lib/common/stack_dump.h"
#include "lib/httpserver/connection_metrics.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/httpserver/metrics_endpoint.h"

namespace dra::kubeletplugin {
namespace {

metrics::Family<metrics::Counter>* AddCorruptionsCounter(metrics::Registry* registry) {
  return registry->AddCounter("nvidia_dra_checkpoint_corruptions_total",
                              "Corrupt checkpoints moved aside and replaced.", {});
}

}  // namespace

PluginHost::PluginHost(const PluginHostConfig& config, Options options, SignalHandler* signals)
    : config_(config), options_(std::move(options)), signals_(signals) {}

PluginHost::~PluginHost() { Stop({}, {}); }

absl::Status PluginHost::MakeDirectories() {
  if (config_.node_name.empty()) return absl::InvalidArgumentError("--node-name is required");
  plugin_dir_ = absl::StrCat(config_.kubelet_plugins_dir, "/", options_.driver_name);
  RETURN_IF_ERROR(dra::MakeDirectories(plugin_dir_, 0750));
  if (options_.stack_dump_on_usr2) RETURN_IF_ERROR(SetUpStackDump());
  return dra::MakeDirectories(config_.cdi_root, 0750);
}

absl::Status PluginHost::SetUpStackDump() {
  // SIGUSR2 writes every thread's stack to a file, for debugging a stuck plugin: in a directory
  // of the plugin's own that only root may enter (not a world-writable /tmp, where another user
  // could plant a link or read the stacks).
  const std::string debug_dir = absl::StrCat(plugin_dir_, "/debug");
  RETURN_IF_ERROR(dra::MakeDirectories(debug_dir, 0700));
  if (::chmod(debug_dir.c_str(), 0700) != 0) {
    return dra::ErrnoToStatus(errno, absl::StrCat("chmod 0700 ", debug_dir));
  }
  InstallStackDumpHandler();
  signals_->OnUsr2([path = absl::StrCat(debug_dir, "/thread-stacks.dump")] {
    int threads = 0;
    absl::Status s = DumpAllThreadStacks(path, &threads);
    if (s.ok()) {
      DRA_INFO("wrote thread stacks", "path", path, "threads", threads);
    } else {
      DRA_WARNING("thread stack dump failed", "err", s);
    }
  });
  return absl::OkStatus();
}

absl::Status PluginHost::ConnectToApiServer() {
  ASSIGN_OR_RETURN(rest_, k8s::ResolveRestConfig(config_.kubeconfig));
  ASSIGN_OR_RETURN(client_, k8s::Client::Create(rest_, {.qps = config_.kube_api_qps,
                                                        .burst = config_.kube_api_burst}));
  ASSIGN_OR_RETURN(claim_client_,
                   k8s::Client::Create(rest_, {.qps = config_.kube_api_qps,
                                               .burst = config_.kube_api_burst,
                                               .max_retries = 1,
                                               .request_timeout = absl::Seconds(10)}));
  node_ref_ = {.kind = "Node", .name = config_.node_name};
  if (!config_.daemonset_name.empty()) {
    uninstall_ = std::make_unique<UninstallWatch>(client_.get(), config_.namespace_name,
                                                  config_.daemonset_name);
  }
  driver_metrics_ =
      std::make_unique<DriverMetrics>(&registry_, options_.driver_name, config_.node_name);
  corruptions_ = AddCorruptionsCounter(&registry_);
  undecodable_ = std::make_unique<k8s::UndecodableObjectsMetric>(&registry_);
  return absl::OkStatus();
}

void PluginHost::DescribeMetrics(metrics::Registry* registry) {
  DriverMetrics driver(registry, /*driver=*/"", /*node=*/"");
  AddCorruptionsCounter(registry);
  k8s::UndecodableObjectsMetric undecodable(registry);
  // What the metrics endpoint's server registers (connection metrics; it has no request budget).
  httpserver::ConnectionMetrics endpoint(registry,
                                         httpserver::EndpointServerOptions().metrics_prefix);
}

void PluginHost::PostNodeEvent(const std::string& type, const std::string& reason,
                               const std::string& message) const {
  (void)k8s::PostEvent(client_.get(), node_ref_, type, reason, message, options_.component,
                       config_.node_name);
}

absl::StatusOr<checkpoint::Checkpoint*> PluginHost::OpenCheckpoint(CheckpointPolicy policy) {
  policy_ = std::move(policy);
  checkpoint::CheckpointOptions options;
  options.on_corruption = [this](const checkpoint::CorruptionReport& r) {
    corruptions_->WithLabels({})->Inc();
    if (!serving_) return;  // FinishCheckpointRecovery posts the event with its outcome
    cleanup_now_ = true;
    PostNodeEvent("Warning", "CheckpointCorrupt",
                  absl::StrCat("checkpoint ", r.path, " was corrupt (", r.reason, "); moved to ",
                               r.moved_to, "; ", policy_.later_outcome));
  };
  options.convert_go_devices = policy_.convert_go_devices;
  // A node switched from the Go driver: its checkpoint's claims are adopted (checkpoint.h A1-A5),
  // so their containers keep their CDI specs and their unprepare undoes what the Go driver set.
  options.on_adoption = [this](const checkpoint::AdoptionReport& r) {
    PostNodeEvent("Normal", "CheckpointAdopted",
                  absl::StrCat("adopted ", r.claims, " prepared claims (", r.started,
                               " of them PrepareStarted) from the Go driver's checkpoint ", r.path,
                               "; the Go driver's file is kept at ", r.kept_at, " for a rollback"));
  };
  options.on_reboot = policy_.on_reboot;
  ASSIGN_OR_RETURN(checkpoint_,
                   checkpoint::Checkpoint::Open(plugin_dir_, config_.boot_id_path, options));
  return checkpoint_.get();
}

void PluginHost::FinishCheckpointRecovery() {
  if (const auto& r = checkpoint_->open_corruption()) {
    const std::string outcome = policy_.rebuild ? policy_.rebuild() : policy_.later_outcome;
    DRA_WARNING("checkpoint was corrupt; moved aside and replaced", "path", r->path, "movedTo",
                r->moved_to, "outcome", outcome);
    PostNodeEvent("Warning", "CheckpointCorrupt",
                  absl::StrCat("checkpoint ", r->path, " was corrupt (", r->reason, "); moved to ",
                               r->moved_to, "; ", outcome));
  }
  serving_ = true;
}

absl::StatusOr<SlicePublisher*> PluginHost::CreatePublisher() {
  ASSIGN_OR_RETURN(publisher_,
                   SlicePublisher::Create(client_.get(), {.driver = options_.driver_name,
                                                          .node_name = config_.node_name}));
  return publisher_.get();
}

absl::StatusOr<PluginServer*> PluginHost::ServeKubelet(DraDriver* driver,
                                                       PluginServerOptions options) {
  options.driver_name = options_.driver_name;
  options.claim_getter = ClaimGetterFromClient(claim_client_.get());
  options.kubelet_plugins_dir = config_.kubelet_plugins_dir;
  options.registry_dir = config_.kubelet_registrar_dir;
  options.pod_uid = config_.pod_uid;
  ASSIGN_OR_RETURN(server_, PluginServer::Create(driver, options));
  return server_.get();
}

absl::Status PluginHost::ServeHttpAndHealthPort() {
  ASSIGN_OR_RETURN(http_, httpserver::StartMetricsEndpoint(config_.http_endpoint,
                                                           config_.metrics_path, &registry_));
  if (config_.healthcheck_port >= 0) {
    // Healthy (the pod Ready) only once the kubelet has registered this instance.
    ASSIGN_OR_RETURN(health_, HealthServer::StartFor(config_.healthcheck_port, server_.get()));
    DRA_INFO("serving gRPC health", "port", health_->port());
  }
  return absl::OkStatus();
}

void PluginHost::StartCleanup(std::function<void()> pass) {
  // Waits for the next pass: the interval, or sooner when a corrupt checkpoint asks for one.
  // True at shutdown.
  auto wait_for_next_pass = [this] {
    const absl::Time deadline = absl::Now() + config_.cleanup_interval;
    while (absl::Now() < deadline) {
      if (signals_->WaitForShutdown(std::min(absl::Seconds(1), deadline - absl::Now()))) {
        return true;
      }
      if (stopping_) return true;
      if (cleanup_now_.exchange(false)) return false;
    }
    return stopping_.load();
  };
  cleaner_ = std::thread([pass = std::move(pass), wait_for_next_pass] {
    do {
      pass();
    } while (!wait_for_next_pass());
  });
}

void PluginHost::Stop(const StopHooks& hooks, const UninstallFiles& files) {
  if (stopped_) return;
  stopped_ = true;
  if (health_) health_->Stop();
  if (hooks.before_server_stop) hooks.before_server_stop();
  if (server_) server_->Stop();  // removes our sockets: the kubelet sees the plugin go away
  if (hooks.after_server_stop) hooks.after_server_stop();
  if (publisher_) publisher_->Stop();
  // The cleanup thread ends within a second of its wait; a pass under way runs to its end.
  stopping_ = true;
  if (cleaner_.joinable()) cleaner_.join();
  if (hooks.after_cleanup_stop) hooks.after_cleanup_stop();
  if (uninstall_ && uninstall_->DaemonSetDeleted()) {
    std::function<bool(const checkpoint::PreparedClaim&)> holds_files = files.holds_files;
    if (!holds_files) holds_files = [](const checkpoint::PreparedClaim&) { return true; };
    RemoveFilesAfterUninstall(checkpoint_.get(),
                              {.cdi_root = config_.cdi_root,
                               .cdi_prefixes = files.cdi_prefixes,
                               .plugin_dir = plugin_dir_},
                              holds_files);
  }
  if (uninstall_) uninstall_->Stop();
  if (http_) http_->Stop();
  health_.reset();
  server_.reset();
}

}  // namespace dra::kubeletplugin
