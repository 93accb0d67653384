#pragma once

// The operational endpoints of our daemons (/metrics, /healthz, /readyz): a handler per path over
// the server core (lib/httpserver/server.h, which states the behaviour). Plain TCP,
// `Connection: close`, GET and HEAD only (405 otherwise, 404 for other paths), no request bodies.
//
// Slow clients cannot stall it (a liveness probe must get through whatever else connects): one
// loop thread serves the connections concurrently; each connection has an overall deadline to
// deliver its request header (kEndpointRequestTimeout, from accept; a partly received one gets a
// 408) and one to take the response (kEndpointWriteTimeout), and is closed when it passes; at most
// kEndpointMaxConnections are open, more are accepted and closed at once. A connection costs a
// socket, a few hundred bytes of bookkeeping and its request (at most 16 KiB, typically under 200
// bytes) and response while they are in flight. Stop closes every connection at once.
//
// Thread-safety: handlers run on the server's own thread, one at a time, so a slow handler delays
// the others (they are expected to take microseconds). Start/Stop from any one thread.

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/httpserver/connection_metrics.h"
#include "lib/httpserver/request.h"
#include "lib/httpserver/server.h"
#include "lib/metrics/metrics.h"

namespace dra::httpserver {

// From accept to the end of the request header. Probes send theirs at once; the kubelet's probe
// timeout defaults to 1 s and Prometheus' scrape timeout to 10 s.
inline constexpr absl::Duration kEndpointRequestTimeout = absl::Seconds(5);
// For the client to take the whole response (a large /metrics page to a slow scraper).
inline constexpr absl::Duration kEndpointWriteTimeout = absl::Seconds(10);
// Open connections at most; 1000 slow clients leave room for the probes.
inline constexpr int kEndpointMaxConnections = 2048;
// The request header at most (431 beyond).
inline constexpr size_t kEndpointMaxRequestBytes = size_t{16} << 10;

using EndpointHandler = std::function<HttpResponse()>;

struct EndpointServerOptions {
  // ":port" (all interfaces, IPv6 and IPv4), "host:port" (IPv4) or "[v6]:port"; port 0 picks a
  // free port. See Listen() in lib/httpserver/listen.h.
  std::string address;
  absl::Duration request_timeout = kEndpointRequestTimeout;
  absl::Duration write_timeout = kEndpointWriteTimeout;
  int max_connections = kEndpointMaxConnections;
  // Connection metrics (lib/httpserver/connection_metrics.h) are registered here when set.
  metrics::Registry* registry = nullptr;
  std::string metrics_prefix = "nvidia_dra_http_endpoint";
};

class EndpointServer {
 public:
  // `handlers` by path (without the query string).
  static absl::StatusOr<std::unique_ptr<EndpointServer>> Start(
      EndpointServerOptions options, std::map<std::string, EndpointHandler> handlers);
  // Start({.address = address}, handlers).
  static absl::StatusOr<std::unique_ptr<EndpointServer>> Start(
      const std::string& address, std::map<std::string, EndpointHandler> handlers);
  EndpointServer(const EndpointServer&) = delete;
  EndpointServer& operator=(const EndpointServer&) = delete;

  // Closes the listener and every connection; idempotent.
  void Stop() { server_->Stop(); }
  int port() const { return server_->port(); }
  const ConnectionMetrics& connection_metrics() const { return server_->connection_metrics(); }

 private:
  explicit EndpointServer(std::unique_ptr<Server> server) : server_(std::move(server)) {}

  std::unique_ptr<Server> server_;
};

}  // namespace dra::httpserver
