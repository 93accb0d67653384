#include "lib/webhook/webhook.h"

#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/httpserver/connection_metrics.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/httpserver/metrics_endpoint.h"
#include "lib/httpserver/request_budget.h"

namespace dra::webhook {

WebhookMetrics::WebhookMetrics(metrics::Registry* registry) {
  auto* reviews = registry->AddCounter("nvidia_dra_webhook_admission_reviews_total",
                                       "Admission reviews answered, by result (allowed, denied, "
                                       "bad_request).",
                                       {"result"});
  allowed_ = reviews->WithLabels({"allowed"});
  denied_ = reviews->WithLabels({"denied"});
  bad_request_ = reviews->WithLabels({"bad_request"});
  latency_ = registry
                 ->AddHistogram("nvidia_dra_webhook_admission_review_duration_seconds",
                                "Time to decode, validate and answer one admission review.", {},
                                metrics::ExponentialBuckets(0.00001, 4, 10))
                 ->WithLabels({});
}

void WebhookMetrics::Observe(ReviewOutcome outcome, absl::Duration latency) {
  switch (outcome) {
    case ReviewOutcome::kAllowed:
      allowed_->Inc();
      break;
    case ReviewOutcome::kDenied:
      denied_->Inc();
      break;
    case ReviewOutcome::kBadRequest:
      bad_request_->Inc();
      break;
  }
  latency_->Observe(absl::ToDoubleSeconds(latency));
}

HttpsHandler MakeWebhookHandler(const FeatureGates* gates, WebhookMetrics* metrics) {
  return [gates, metrics](const HttpRequest& req) {
    HttpResponse resp;
    if (req.path == kValidatePath) {
      if (req.method != "POST") {
        resp.code = 405;
        resp.body = "method not allowed; use POST\n";
        return resp;
      }
      auto start = std::chrono::steady_clock::now();
      AdmissionResult r = HandleAdmissionReview(req.content_type, req.body, *gates);
      if (metrics != nullptr) {
        metrics->Observe(r.outcome, absl::FromChrono(std::chrono::steady_clock::now() - start));
      }
      if (r.outcome != ReviewOutcome::kAllowed) {
        DRA_VLOG(2, "admission review not allowed", "result", ReviewOutcomeName(r.outcome),
                 "httpCode", r.http_code, "message", r.message);
      } else {
        DRA_VLOG(5, "admission review allowed");
      }
      resp.code = r.http_code;
      resp.content_type = std::move(r.content_type);
      resp.body = std::move(r.body);
      return resp;
    }
    if (req.path == kReadyzPath) {
      if (req.method != "GET" && req.method != "HEAD") {
        resp.code = 405;
        resp.body = "method not allowed; use GET\n";
        return resp;
      }
      resp.body = "ok";
      return resp;
    }
    resp.code = 404;
    resp.body = "404 page not found\n";
    return resp;
  };
}

absl::StatusOr<WebhookServers> StartWebhook(const WebhookConfig& config) {
  if (config.tls_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert-file is required");
  }
  if (config.tls_private_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-private-key-file is required");
  }
  if (config.port < 0 || config.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port ", config.port, " is out of range, expected 0..65535"));
  }
  HttpsServerOptions options;
  const int64_t largest_request =
      static_cast<int64_t>(options.max_header_bytes + options.max_body_bytes);
  if (config.max_buffered_request_bytes < largest_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-buffered-request-bytes ", config.max_buffered_request_bytes,
        " is below one largest request (", largest_request, " bytes: ", options.max_header_bytes,
        " of header, ", options.max_body_bytes, " of body), which could never be read"));
  }
  absl::StatusOr<std::unique_ptr<ServingCertificate>> certs = ServingCertificate::Load(
      {config.tls_cert_file, config.tls_private_key_file, config.cert_check_interval});
  if (!certs.ok()) {
    return Annotate(certs.status(), "--tls-cert-file/--tls-private-key-file");
  }

  WebhookServers s;
  s.certs = *std::move(certs);
  s.registry = std::make_unique<metrics::Registry>();
  s.metrics = std::make_unique<WebhookMetrics>(s.registry.get());
  ASSIGN_OR_RETURN(s.metrics_server,
                   httpserver::StartMetricsEndpoint(config.http_endpoint, config.metrics_path,
                                                    s.registry.get()));

  options.address = absl::StrCat(config.bind_address.find(':') != std::string::npos
                                     ? absl::StrCat("[", config.bind_address, "]")
                                     : config.bind_address,
                                 ":", config.port);
  options.registry = s.registry.get();  // nvidia_dra_webhook_connections_*, _request_buffer_*
  options.max_buffered_request_bytes = static_cast<size_t>(config.max_buffered_request_bytes);
  absl::StatusOr<std::unique_ptr<HttpsServer>> server =
      StartHttpsServer(options, s.certs.get(), MakeWebhookHandler(config.gates, s.metrics.get()));
  if (!server.ok()) {
    if (s.metrics_server) s.metrics_server->Stop();
    return Annotate(server.status(), "--port");
  }
  s.server = *std::move(server);
  DRA_INFO("webhook serving", "address", options.address, "port", s.server->port(), "path",
           kValidatePath);
  return s;
}

absl::Status RunWebhook(const WebhookConfig& config, SignalHandler* signals) {
  ASSIGN_OR_RETURN(WebhookServers s, StartWebhook(config));
  signals->OnShutdown([&](int signal) {
    DRA_INFO("shutting down", "signal", signal);
    s.server->Stop();
    if (s.metrics_server) s.metrics_server->Stop();
  });
  signals->WaitForShutdown();
  return absl::OkStatus();
}

std::string MetricsMarkdown() {
  metrics::Registry registry;
  WebhookMetrics webhook(&registry);
  // What httpserver::Server registers under its options' metrics_prefix: connection metrics, and
  // budget metrics when it has a request budget (the HTTPS server does, the metrics endpoint does
  // not). MetricsMarkdownIsWhatStartWebhookRegisters fails when this differs from a started
  // webhook.
  const std::string https_prefix = HttpsServerOptions().metrics_prefix;
  httpserver::ConnectionMetrics https_connections(&registry, https_prefix);
  httpserver::RequestBudget https_budget(kMaxBufferedRequestBytes, &registry, https_prefix);
  httpserver::ConnectionMetrics endpoint_connections(
      &registry, httpserver::EndpointServerOptions().metrics_prefix);
  return metrics::DescribeMarkdown(registry);
}

}  // namespace dra::webhook
