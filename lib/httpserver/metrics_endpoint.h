#pragma once

// The operational endpoint every binary of the driver serves on --http-endpoint: /healthz and the
// Prometheus text of a registry on --metrics-path (lib/common/flags.h AddMetricsServerFlags).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/metrics/metrics.h"

namespace dra::httpserver {

// Starts an EndpointServer on `endpoint` with /healthz ("ok") and, unless `metrics_path` is empty,
// `registry` rendered at `metrics_path` (a missing leading '/' is added). The server's own
// connection metrics go into `registry`, which must outlive the server. An empty `endpoint`
// starts nothing and returns null. A failure to listen is returned with "--http-endpoint" in its
// message.
absl::StatusOr<std::unique_ptr<EndpointServer>> StartMetricsEndpoint(
    const std::string& endpoint, const std::string& metrics_path, metrics::Registry* registry);

}  // namespace dra::httpserver
