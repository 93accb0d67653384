#pragma once

// The compute-domain-controller process after flag parsing: API client, metrics endpoint, leader
// election (when enabled) and the Controller, until a shutdown signal or the loss of leadership.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/cdcontroller/config.h"
#include "lib/cdcontroller/controller.h"
#include "lib/common/feature_gates.h"
#include "lib/common/signals.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/k8s/client.h"
#include "lib/k8s/wire_decode.h"
#include "lib/metrics/metrics.h"

namespace dra::cdcontroller {

// The process's registry and what registers in it: the undecodable-objects counter, the metrics
// endpoint and the Controller (not started). Members go in reverse order.
struct ControllerProcess {
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<k8s::UndecodableObjectsMetric> undecodable;
  std::unique_ptr<httpserver::EndpointServer> metrics_server;  // null without --http-endpoint
  std::unique_ptr<Controller> controller;
};

// What RunController builds once it has its API client.
absl::StatusOr<ControllerProcess> CreateControllerProcess(const ControllerConfig& config,
                                                          const std::string& http_endpoint,
                                                          const std::string& metrics_path,
                                                          k8s::Client* client);

// Every metric family the controller serves with --http-endpoint set, registered in a fresh
// registry without starting anything, as metrics::DescribeMarkdown rows: what the unlisted
// --help-metrics-markdown prints for docs/reference.md. controller_start_test checks it against
// CreateControllerProcess.
std::string MetricsMarkdown();

// Returns OK after a shutdown signal (the lease, when held, is released after the controller
// stopped, so that a standby takes over at once); Aborted when leadership was lost (the process
// should exit non-zero and be restarted); other errors for bad configuration or startup
// failures.
absl::Status RunController(ProcessOptions options, const FeatureGates& gates,
                           SignalHandler* signals);

}  // namespace dra::cdcontroller
