#pragma once

// The operational endpoint every binary of the driver serves on --http-endpoint: /healthz and the
// Prometheus text of a registry on --metrics-path (lib/common/flags.h AddMetricsServerFlags).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/metrics/http_server.h"
#include "lib/metrics/metrics.h"

namespace dra::metrics {

// Starts an HttpServer on `endpoint` with /healthz ("ok") and, unless `metrics_path` is empty,
// `registry` rendered at `metrics_path` (a missing leading '/' is added). The server's own
// connection metrics go into `registry`, which must outlive the server. An empty `endpoint`
// starts nothing and returns null. A failure to listen is returned with "--http-endpoint" in its
// message.
absl::StatusOr<std::unique_ptr<HttpServer>> StartMetricsEndpoint(const std::string& endpoint,
                                                                 const std::string& metrics_path,
                                                                 Registry* registry);

}  // namespace dra::metrics
