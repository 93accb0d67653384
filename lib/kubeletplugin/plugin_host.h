#pragma once

// PluginHost: the process scaffolding both kubelet plugins (gpu-kubelet-plugin,
// compute-domain-kubelet-plugin) share; each plugin's PluginApp owns one and adds its own steps.
//
// What the host owns: the plugin data directory <kubelet_plugins_dir>/<driver> and the CDI
// directory, the SIGUSR2 stack dump (optional), the API clients, the metrics registry with the
// metrics both plugins have (DriverMetrics, nvidia_dra_checkpoint_corruptions_total,
// nvidia_dra_undecodable_objects_total), the uninstall watch (--daemonset-name), the checkpoint
// and its corruption/adoption policy, the ResourceSlice publisher, the kubelet-facing gRPC
// servers and the kubelet registration, the /metrics and /healthz server, the gRPC health port,
// the cleanup thread and the removal of the driver's files after an uninstall.
//
// Start order (each step a method the plugin calls, its own steps between them):
//   1 MakeDirectories: plugin data directory and CDI directory (0750), the stack dump directory
//   2 ConnectToApiServer: API clients, the Node event target, the uninstall watch, the metrics
//   3 OpenCheckpoint: boot ID rule, corruption and adoption (CheckpointPolicy below)
//   4 FinishCheckpointRecovery: before serving the kubelet, once the plugin can rebuild (its
//     state built; at once for a plugin without a rebuild): the startup corruption event with
//     what the rebuild made of it; from then on a corruption starts a cleanup pass at once
//   5 CreatePublisher: the ResourceSlice publisher (the plugin publishes through it)
//   6 ServeKubelet: the DRA socket, then the registration socket
//   7 ServeHttpAndHealthPort: /metrics and /healthz, the gRPC health port (SERVING once the
//     kubelet registered this instance)
//   8 StartCleanup: the cleanup thread, one pass at once and then every --cleanup-interval, or
//     sooner after a corrupt checkpoint was found by a later read
// A step that fails returns its error; the plugin returns it and Stop (from its destructor) stops
// what was started.
//
// Stop order (Stop, idempotent), with the plugin's hooks (StopHooks):
//   1 the gRPC health port
//   2 hooks.before_server_stop
//   3 the kubelet servers (their sockets removed, so the kubelet sees the plugin leave)
//   4 hooks.after_server_stop
//   5 the ResourceSlice publisher
//   6 the cleanup thread (a pass under way runs to its end)
//   7 hooks.after_cleanup_stop
//   8 after an uninstall (the DaemonSet deleted) with no claim prepared: the driver's files
//   9 the uninstall watch, the HTTP server
// The servers are released at the end of Stop: nothing the host keeps afterwards points into the
// plugin's parts (its driver), so the plugin may destroy them before the host.
//
// What each plugin supplies: its driver name and event component (Options), its flags beyond
// PluginHostConfig (AddPluginHostFlags adds the shared ones), the checkpoint's reboot, Go
// adoption and rebuild hooks, its DraDriver and server options, its cleanup pass, its stop hooks
// and the CDI prefixes of its files.
//
// Thread-safety: the steps and Stop from one thread; the cleanup thread is the host's own; the
// corruption callback runs on whichever thread reads the checkpoint.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/common/feature_gates.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/status.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/k8s/client.h"
#include "lib/k8s/events.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/wire_decode.h"
#include "lib/kubeletplugin/driver.h"
#include "lib/kubeletplugin/driver_metrics.h"
#include "lib/kubeletplugin/health_server.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "lib/kubeletplugin/slice_publisher.h"
#include "lib/kubeletplugin/uninstall.h"
#include "lib/metrics/metrics.h"

namespace dra {
class Flags;
}

namespace dra::kubeletplugin {

// The configuration both plugins have, one flag each (AddPluginHostFlags). A plugin's own
// configuration derives from it.
struct PluginHostConfig {
  std::string node_name;
  std::string namespace_name = "default";
  // The plugins' DaemonSet in namespace_name: deleted (helm uninstall), the plugin removes its
  // files at shutdown (uninstall.h). Empty: it never does.
  std::string daemonset_name;
  // This pod's UID: sockets named after it, so that the old and the new pod of a surge rollout
  // serve side by side (plugin_server.h). Empty: the fixed socket names.
  std::string pod_uid;
  std::string cdi_root = "/etc/cdi";
  std::string nvidia_driver_root = "/";                // host view
  std::string container_driver_root = "/driver-root";  // plugin view
  std::string dev_root;                                // empty: derived from the driver root
  std::string proc_root = "/proc";
  // --alt-proc-devices-path: read instead of <proc_root>/devices; empty: that file.
  std::string alt_proc_devices;
  std::string kubelet_registrar_dir = kDefaultKubeletRegistryDir;
  std::string kubelet_plugins_dir = kDefaultKubeletPluginsDir;
  std::string nvidia_cdi_hook_path;  // accepted for compatibility; no hook is used
  int healthcheck_port = -1;
  std::string http_endpoint;
  std::string metrics_path = "/metrics";
  std::string kubeconfig;
  double kube_api_qps = 5;
  int kube_api_burst = 10;
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
  absl::Duration cleanup_interval = absl::Minutes(10);
  const FeatureGates* gates = nullptr;

  bool GateOn(absl::string_view gate) const { return gates != nullptr && gates->Enabled(gate); }
};

// The help texts of the shared flags that say something about one plugin; the rest is the same
// for both.
struct PluginHostFlagHelp {
  std::string namespace_name;         // --namespace
  std::string cdi_root;               // --cdi-root
  std::string container_driver_root;  // --container-driver-root
  std::string proc_root;              // --proc-root
  std::string alt_proc_devices;       // --alt-proc-devices-path
  std::string kubelet_plugins_dir;    // --kubelet-plugins-directory-path
  std::string cleanup_interval;       // --cleanup-interval
};

// Adds the flags of PluginHostConfig (also --kubeconfig, --kube-api-qps, --kube-api-burst,
// --http-endpoint, --metrics-path; not --boot-id, which no binary has). The binary adds its own
// flags, then the logging and feature-gate flags.
void AddPluginHostFlags(Flags& flags, PluginHostConfig* config, const PluginHostFlagHelp& help);

// The main() of a kubelet plugin binary: the SIGUSR2 stack dump's symbolizer and the signal
// handler (before any other thread, so that only the handler's thread receives SIGTERM), the
// feature gates (`register_gates`), the flags (AddPluginHostFlags, then `add_flags`, then -v and
// --feature-gates; --help and --version exit here), the startup configuration log, then `run`
// until shutdown. Returns main's exit status: 1 when the signals or the gates cannot be set up or
// `run` fails (logged), 2 for bad flags (ParseOrExit), 0 otherwise.
struct PluginMainSpec {
  std::string program;  // "gpu-kubelet-plugin"
  std::string description;
  std::string version;
  PluginHostFlagHelp help;
  std::function<absl::Status(FeatureGates& gates)> register_gates;
  std::function<void(Flags& flags)> add_flags;  // the binary's own flags
  // Starts the plugin and runs it until `signals` reports shutdown (RunUntilShutdown).
  std::function<absl::Status(SignalHandler* signals)> run;
  // What the unlisted --help-metrics-markdown prints (Flags::SetMetricsReference); unset: no such
  // option.
  std::function<std::string()> metrics_markdown;
  // What the unlisted --help-steps-markdown prints (Flags::SetStepsReference): the plugin's table
  // of prepare steps; unset: no such option.
  std::function<std::string()> steps_markdown;
};
// `config` is the binary's configuration (its gates field is set here); it must outlive the call.
int RunPluginMain(int argc, char** argv, PluginHostConfig* config, const PluginMainSpec& spec);

class PluginHost {
 public:
  struct Options {
    std::string driver_name;  // "gpu.nvidia.com"
    std::string component;    // the component named in the Node events ("gpu-kubelet-plugin")
    // SIGUSR2 writes every thread's stack to <plugin dir>/debug/thread-stacks.dump.
    bool stack_dump_on_usr2 = false;
  };

  // How the checkpoint is opened and what a corrupt or adopted one leads to. Both plugins get the
  // same policy (docs/checkpoint-format.md "Corruption"): the file is moved aside and replaced
  // by an empty one, nvidia_dra_checkpoint_corruptions_total counts it and a Warning Event
  // CheckpointCorrupt on the Node says what came of it. Found by Open: after the plugin built
  // its state, `rebuild` runs (before the kubelet is served) and its outcome goes into the event.
  // Found by a later read: the event at once, with `later_outcome`, and a cleanup pass.
  struct CheckpointPolicy {
    std::function<absl::Status(const checkpoint::ClaimMap& dropped)> on_reboot;
    // Null: a Go driver's checkpoint is corrupt (checkpoint.h).
    checkpoint::GoDevicesConverter convert_go_devices;
    // After a corruption found by Open: rebuilds what can be rebuilt; returns the outcome for the
    // event and the log. Null: nothing is rebuilt and `later_outcome` says so.
    std::function<std::string()> rebuild;
    std::string later_outcome;
  };

  // The plugin's shutdown steps between the host's (the stop order above).
  struct StopHooks {
    std::function<void()> before_server_stop;
    std::function<void()> after_server_stop;
    std::function<void()> after_cleanup_stop;
  };

  // What RemoveFilesIfUninstalled removes, besides the plugin data directory.
  struct UninstallFiles {
    std::vector<std::string> cdi_prefixes;
    // Which checkpoint records keep the files (a claim still prepared).
    std::function<bool(const checkpoint::PreparedClaim&)> holds_files;
  };

  // `config` and `signals` must outlive the host.
  PluginHost(const PluginHostConfig& config, Options options, SignalHandler* signals);
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  absl::Status MakeDirectories();     // 1
  absl::Status ConnectToApiServer();  // 2
  // 3; the checkpoint stays the host's.
  absl::StatusOr<checkpoint::Checkpoint*> OpenCheckpoint(CheckpointPolicy policy);
  void FinishCheckpointRecovery();                               // 4
  absl::StatusOr<SlicePublisher*> CreatePublisher();             // 5
  absl::StatusOr<PluginServer*> ServeKubelet(DraDriver* driver,  // 6
                                             PluginServerOptions options);
  absl::Status ServeHttpAndHealthPort();  // 7
  // Registers in `registry`, without starting anything, every metric family of a host that ran
  // ConnectToApiServer and ServeHttpAndHealthPort (DriverMetrics, the checkpoint-corruption and
  // undecodable-object counters, the metrics endpoint's connection metrics): the start of a
  // plugin's --help-metrics-markdown. PluginHostTest checks it against such a host.
  static void DescribeMetrics(metrics::Registry* registry);
  // 8: `pass` runs on the cleanup thread, once at once and then after each wait.
  void StartCleanup(std::function<void()> pass);

  // Idempotent. `files`: what goes after an uninstall.
  void Stop(const StopHooks& hooks, const UninstallFiles& files);

  // A Node event from this plugin (best effort; a failure is logged by PostEvent).
  void PostNodeEvent(const std::string& type, const std::string& reason,
                     const std::string& message) const;

  const PluginHostConfig& config() const { return config_; }
  const std::string& driver_name() const { return options_.driver_name; }
  const std::string& plugin_dir() const { return plugin_dir_; }
  const k8s::RestConfig& rest_config() const { return rest_; }
  // General API client (slices, events, informers, retries).
  k8s::Client* client() const { return client_.get(); }
  // Claim reads inside kubelet calls: one retry, a 10 s request timeout, so that they fail fast
  // rather than run past the kubelet's 45 s.
  k8s::Client* claim_client() const { return claim_client_.get(); }
  metrics::Registry* registry() { return &registry_; }
  DriverMetrics* driver_metrics() const { return driver_metrics_.get(); }
  checkpoint::Checkpoint* checkpoint() const { return checkpoint_.get(); }
  SlicePublisher* publisher() const { return publisher_.get(); }
  PluginServer* server() const { return server_.get(); }

 private:
  absl::Status SetUpStackDump();

  const PluginHostConfig& config_;
  const Options options_;
  SignalHandler* const signals_;
  std::string plugin_dir_;
  k8s::RestConfig rest_;
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<k8s::Client> claim_client_;
  k8s::EventTarget node_ref_;
  metrics::Registry registry_;
  std::unique_ptr<DriverMetrics> driver_metrics_;
  metrics::Family<metrics::Counter>* corruptions_ = nullptr;
  // nvidia_dra_undecodable_objects_total; after `registry_`, so that it goes first.
  std::unique_ptr<k8s::UndecodableObjectsMetric> undecodable_;
  std::unique_ptr<UninstallWatch> uninstall_;
  CheckpointPolicy policy_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  // Set once the startup recovery is done: a corruption found later asks the cleanup for a pass.
  std::atomic<bool> serving_{false};
  std::atomic<bool> cleanup_now_{false};
  std::atomic<bool> stopping_{false};  // ends the cleanup thread's wait
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<httpserver::EndpointServer> http_;
  std::unique_ptr<HealthServer> health_;
  std::thread cleaner_;
  bool stopped_ = false;
};

// For a plugin's RunPlugin: starts the app (App::Start(config, signals)), runs until `signals`
// reports shutdown, stops it; returns the startup error otherwise.
template <typename App, typename Config>
absl::Status RunUntilShutdown(const Config& config, SignalHandler* signals) {
  ASSIGN_OR_RETURN(std::unique_ptr<App> app, App::Start(config, signals));
  signals->WaitForShutdown();
  DRA_INFO("shutting down", "signal", signals->shutdown_signal());
  app->Stop();
  return absl::OkStatus();
}

}  // namespace dra::kubeletplugin
