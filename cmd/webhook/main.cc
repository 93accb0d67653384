// webhook: the validating admission webhook of the gpu.nvidia.com DRA driver. It checks the
// opaque GPU configurations in ResourceClaims and ResourceClaimTemplates when they are created or
// updated. Flags and wiring only; the work is in lib/webhook.

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/k8s/quantity.h"
#include "lib/webhook/webhook.h"

int main(int argc, char** argv) {
  // Signals are blocked before any thread starts so that only the handler thread receives them.
  auto signals = dra::SignalHandler::Start();
  if (!signals.ok()) {
    std::fprintf(stderr, "webhook: %s\n", std::string(signals.status().message()).c_str());
    return 1;
  }
  dra::FeatureGates gates;
  if (absl::Status s = dra::api::RegisterDriverFeatureGates(gates, "webhook"); !s.ok()) {
    std::fprintf(stderr, "webhook: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  dra::webhook::WebhookConfig c;
  c.gates = &gates;
  dra::Flags flags("webhook",
                   "webhook is the validating admission webhook of the gpu.nvidia.com DRA driver: "
                   "it rejects ResourceClaims and ResourceClaimTemplates whose gpu.nvidia.com "
                   "opaque configurations do not decode or validate.");
  flags
      .AddString("tls-cert-file", "TLS_CERT_FILE", &c.tls_cert_file,
                 "PEM file with the serving certificate, followed by any intermediate and CA "
                 "certificates. Reloaded when it changes on disk.")
      .Required();
  flags
      .AddString("tls-private-key-file", "TLS_PRIVATE_KEY_FILE", &c.tls_private_key_file,
                 "PEM file with the private key of --tls-cert-file. Reloaded when it changes.")
      .Required();
  flags.AddInt("port", "WEBHOOK_PORT", &c.port, "HTTPS port to listen on (0..65535).");
  flags.AddString("bind-address", "BIND_ADDRESS", &c.bind_address,
                  "IP address to listen on; empty: all interfaces (IPv6 and IPv4).");
  flags.AddMetricsServerFlags(&c.http_endpoint, &c.metrics_path);
  flags.AddDuration("tls-reload-interval", "TLS_RELOAD_INTERVAL", &c.cert_check_interval,
                    "How often the certificate and key files are checked for changes (at most "
                    "once per new connection); 0 checks at every new connection.");
  flags.AddCustom(
      "max-buffered-request-bytes", "MAX_BUFFERED_REQUEST_BYTES", "quantity", "64Mi",
      [&c](absl::string_view v) -> absl::Status {
        absl::StatusOr<dra::k8s::Quantity> q = dra::k8s::Quantity::Parse(v);
        if (!q.ok()) return q.status();
        c.max_buffered_request_bytes = q->Value();
        return absl::OkStatus();
      },
      "Memory for the requests being received (and responses over 1 KiB being sent) of all "
      "HTTPS connections together, as a Kubernetes quantity (64Mi) or bytes; at least one "
      "largest request (3Mi body + 64Ki header). A request or response that does not fit is "
      "answered 503 and its connection closed.");
  flags.AddLoggingFlags();
  // The webhook reads the gates without the dependency and exclusion checks of the plugins
  // (docs/compatibility.md "Feature gates"): only TimeSlicingSettings and MPSSupport change what
  // it accepts.
  flags.AddCustom(
      "feature-gates", "FEATURE_GATES", "mapStringBool", "",
      [&gates](absl::string_view v) { return gates.SetWithoutConstraintChecks(v); },
      absl::StrCat("Comma-separated list of gate=true|false pairs. TimeSlicingSettings and "
                   "MPSSupport make the TimeSlicing and MPS sharing strategies valid. Known "
                   "gates:\n",
                   gates.KnownGatesHelp()));
  flags.SetVersion(DRA_VERSION);
  flags.SetMetricsReference(dra::webhook::MetricsMarkdown);
  flags.ParseOrExit(argc, argv);
  flags.LogStartupConfig(&gates);

  absl::Status s = dra::webhook::RunWebhook(c, signals->get());
  if (!s.ok()) {
    DRA_ERROR("webhook failed", "err", s);
    return 1;
  }
  return 0;
}
