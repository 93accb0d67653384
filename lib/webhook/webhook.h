#pragma once

// The webhook process: routes (POST /validate-resource-claim-parameters, GET /readyz), metrics,
// and the wiring of certificate, HTTPS server, metrics server and signals used by
// cmd/webhook/main.cc.
//
// Thread-safety: the handler from MakeWebhookHandler is called concurrently by the HTTPS server;
// the gates and metrics it uses are thread-safe. RunWebhook runs on main.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/common/feature_gates.h"
#include "lib/common/signals.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/metrics/metrics.h"
#include "lib/webhook/admission.h"
#include "lib/webhook/https_server.h"

namespace dra::webhook {

inline constexpr absl::string_view kValidatePath = "/validate-resource-claim-parameters";
inline constexpr absl::string_view kReadyzPath = "/readyz";

// Review counts by outcome and review latency (parse, validate, encode; not the network).
class WebhookMetrics {
 public:
  explicit WebhookMetrics(metrics::Registry* registry);
  void Observe(ReviewOutcome outcome, absl::Duration latency);

 private:
  metrics::Counter* allowed_;
  metrics::Counter* denied_;
  metrics::Counter* bad_request_;
  metrics::Histogram* latency_;
};

// The router. `gates` must outlive it; `metrics` may be null.
HttpsHandler MakeWebhookHandler(const FeatureGates* gates, WebhookMetrics* metrics);

struct WebhookConfig {
  std::string tls_cert_file;
  std::string tls_private_key_file;
  int port = 443;
  std::string bind_address;   // empty: all interfaces
  std::string http_endpoint;  // metrics server; empty: none
  std::string metrics_path = "/metrics";
  absl::Duration cert_check_interval = absl::Seconds(2);
  // HttpsServerOptions::max_buffered_request_bytes (--max-buffered-request-bytes).
  int64_t max_buffered_request_bytes = kMaxBufferedRequestBytes;
  const FeatureGates* gates = nullptr;
};

// The servers RunWebhook runs and the registry their metrics are in (members destroyed in
// reverse order: the servers before what they use).
struct WebhookServers {
  std::unique_ptr<metrics::Registry> registry;
  std::unique_ptr<WebhookMetrics> metrics;
  std::unique_ptr<httpserver::EndpointServer> metrics_server;  // null without --http-endpoint
  std::unique_ptr<ServingCertificate> certs;
  std::unique_ptr<HttpsServer> server;
};

// Checks the config (errors name the flag) and starts serving.
absl::StatusOr<WebhookServers> StartWebhook(const WebhookConfig& config);

// StartWebhook, then serves until a shutdown signal, then stops gracefully.
absl::Status RunWebhook(const WebhookConfig& config, SignalHandler* signals);

// Every metric family the webhook serves with --http-endpoint set (its own, the HTTPS server's
// and the metrics endpoint's), registered in a fresh registry without starting anything, as
// metrics::DescribeMarkdown rows: what the unlisted --help-metrics-markdown prints for
// docs/reference.md. https_server_test checks it against what StartWebhook registers.
std::string MetricsMarkdown();

}  // namespace dra::webhook
