#include "lib/cdcontroller/app.h"

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "lib/api/driver_gates.h"
#include "lib/cdcontroller/controller.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/httpserver/connection_metrics.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/httpserver/metrics_endpoint.h"
#include "lib/k8s/client.h"
#include "lib/k8s/leader_election.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/wire_decode.h"

namespace dra::cdcontroller {
namespace {

// FEATURE_GATES of the daemon pods: every gate with its effective value, so that the daemons
// behave as the controller does.
std::string GatesText(const FeatureGates& gates) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : gates.ToMap()) {
    parts.push_back(absl::StrCat(name, "=", value ? "true" : "false"));
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace

absl::StatusOr<ControllerProcess> CreateControllerProcess(const ControllerConfig& config,
                                                          const std::string& http_endpoint,
                                                          const std::string& metrics_path,
                                                          k8s::Client* client) {
  ControllerProcess p;
  p.registry = std::make_unique<metrics::Registry>();
  p.undecodable = std::make_unique<k8s::UndecodableObjectsMetric>(p.registry.get());
  ASSIGN_OR_RETURN(p.metrics_server,
                   httpserver::StartMetricsEndpoint(http_endpoint, metrics_path, p.registry.get()));
  ASSIGN_OR_RETURN(p.controller, Controller::Create(client, config, p.registry.get()));
  return p;
}

std::string MetricsMarkdown() {
  metrics::Registry registry;
  k8s::UndecodableObjectsMetric undecodable(&registry);
  // What the metrics endpoint's server registers (connection metrics; it has no request budget).
  httpserver::ConnectionMetrics endpoint(&registry,
                                         httpserver::EndpointServerOptions().metrics_prefix);
  absl::StatusOr<std::unique_ptr<Controller>> controller =
      Controller::Create(/*client=*/nullptr, ControllerConfig{}, &registry);
  if (!controller.ok()) return "";
  return metrics::DescribeMarkdown(registry);
}

absl::Status RunController(ProcessOptions o, const FeatureGates& gates, SignalHandler* signals) {
  ControllerConfig& c = o.controller;
  RETURN_IF_ERROR(ValidateConfig(c, gates.Enabled(api::gate::kHostManagedIMEXDaemon)));
  c.feature_gates_text = GatesText(gates);
  if (!o.pprof_path.empty()) {
    DRA_WARNING("--pprof-path is accepted for compatibility but has no effect", "path",
                o.pprof_path);
  }

  ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::ResolveRestConfig(o.kubeconfig));
  ASSIGN_OR_RETURN(
      std::unique_ptr<k8s::Client> client,
      k8s::Client::Create(rest, internal::ClientOptionsFor(o.kube_api_qps, o.kube_api_burst)));

  ASSIGN_OR_RETURN(ControllerProcess process,
                   CreateControllerProcess(c, o.http_endpoint, o.metrics_path, client.get()));
  Controller* controller = process.controller.get();

  if (!o.leader_election_enabled) {
    RETURN_IF_ERROR(controller->Start());
    DRA_INFO("controller running", "namespace", c.driver_namespace);
    signals->WaitForShutdown();
    controller->Stop();
    return absl::OkStatus();
  }

  // Leader election gets its own client: its renewals must not queue behind the controller's
  // requests, and one must not hang longer than the renew deadline.
  k8s::ClientOptions le_options;
  le_options.qps = 0;
  le_options.request_timeout = o.renew_deadline;
  le_options.field_manager = "compute-domain-controller";
  ASSIGN_OR_RETURN(std::unique_ptr<k8s::Client> le_client, k8s::Client::Create(rest, le_options));
  std::unique_ptr<k8s::LeaseLock> lock =
      k8s::NewApiLeaseLock(le_client.get(), o.leader_election_namespace, o.leader_election_name);
  k8s::LeaderElectionConfig le;
  le.lease_namespace = o.leader_election_namespace;
  le.lease_name = o.leader_election_name;
  le.identity = k8s::NewLeaderIdentity(c.pod_name);
  le.lease_duration = o.lease_duration;
  le.renew_deadline = o.renew_deadline;
  le.retry_period = o.retry_period;
  le.release_on_cancel = true;

  absl::Mutex mu;
  absl::Status start_status;  // guarded by mu
  std::thread starter;
  std::unique_ptr<k8s::LeaderElector> elector;
  k8s::LeaderElector::Callbacks callbacks;
  // Starting waits for the caches; it runs beside the elector so that renewals go on meanwhile.
  callbacks.on_started_leading = [&] {
    starter = std::thread([&] {
      absl::Status s = controller->Start();
      if (!s.ok()) {
        {
          absl::MutexLock l(&mu);
          start_status = s;
        }
        elector->Stop();
      }
    });
  };
  callbacks.on_stopped_leading = [&] {
    if (starter.joinable()) starter.join();
    controller->Stop();
    DRA_INFO("stopped leading; controller stopped", "identity", le.identity);
  };
  ASSIGN_OR_RETURN(elector, k8s::LeaderElector::Create(le, lock.get(), callbacks));
  signals->OnShutdown([&elector](int) { elector->Stop(); });
  absl::Status run = elector->Run();
  if (starter.joinable()) starter.join();
  controller->Stop();
  absl::MutexLock l(&mu);
  if (!start_status.ok()) return Annotate(start_status, "start controller");
  return run;
}

}  // namespace dra::cdcontroller
