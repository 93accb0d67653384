#include "lib/webhook/https_server.h"

#include <utility>

namespace dra::webhook {

HttpsServerOptions::HttpsServerOptions() {
  address = ":443";
  keep_alive = true;
  max_body_bytes = 3 << 20;
  max_header_bytes = 64 << 10;
  max_buffered_request_bytes = kMaxBufferedRequestBytes;
  budget_owner = "webhook";
  budget_setting = "--max-buffered-request-bytes";
  handshake_timeout = kHandshakeTimeout;
  request_timeout = kRequestTimeout;
  idle_timeout = kIdleTimeout;
  write_timeout = kWriteTimeout;
  max_connections = kMaxConnections;
  loop_threads = 0;
  thread_name = kLoopThreadName;
  log_name = "https server";
  shutdown_grace = absl::Seconds(10);
  metrics_prefix = "nvidia_dra_webhook";
}

absl::StatusOr<std::unique_ptr<HttpsServer>> StartHttpsServer(HttpsServerOptions options,
                                                              ServingCertificate* certs,
                                                              HttpsHandler handler) {
  options.tls_context = [certs] { return certs->Current(); };
  return httpserver::Server::Start(std::move(options), std::move(handler));
}

}  // namespace dra::webhook
