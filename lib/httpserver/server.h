#pragma once

// The HTTP/1.1 server core of the driver, used by the admission webhook (HTTPS, keep-alive,
// request bodies: lib/webhook/https_server.h) and by every daemon's metrics/health endpoint
// (plain HTTP, GET/HEAD, Connection: close: lib/httpserver/endpoint_server.h). Non-blocking sockets
// driven by one or more epoll loops; Content-Length bodies up to a bound (413 beyond);
// "Expect: 100-continue" is answered; chunked bodies are refused (501). One request parser
// (request.h), fuzzed. TLS is optional (`tls_context`, tls_transport.h).
//
// Slow clients cannot stall it (a liveness probe or the API server must get through whatever
// else connects):
//   - no socket operation blocks: a connection that sends slowly or not at all only holds its
//     own small state, and the loop serves the others meanwhile;
//   - every connection has overall deadlines, not per-read timeouts that each byte renews: the
//     TLS handshake must end within `handshake_timeout` of accept, the first request must be
//     fully read within `request_timeout` of the handshake's end (of accept without TLS), a later
//     one within `request_timeout` of its first byte; between requests a connection may idle for
//     `idle_timeout`; a response must be taken within `write_timeout`. When a deadline passes the
//     connection is closed (a partly received request gets a 408 first) and counted in
//     <prefix>_connections_timed_out_total{phase} (connection_metrics.h);
//   - at most `max_connections` are open; more are accepted and closed at once
//     (<prefix>_connections_rejected_total).
// Memory is bounded across connections, not only per connection, when `max_buffered_request_bytes`
// is set: request buffers (and responses over 1 KiB, held until the client takes them) come from
// one budget for all connections together (request_budget.h). A request's whole buffer is taken
// once its header says how large it is, before its body is read; a request or response that does
// not fit is answered 503 and its connection closed (<prefix>_request_buffer_refused_total;
// <prefix>_request_buffer_bytes is the budget in use). A connection costs about 200 bytes of
// bookkeeping, plus with TLS about 42 KiB of OpenSSL state during the handshake (none until its
// ClientHello has fully arrived: it is peeked, not read) and its OpenSSL connection state between
// requests, plus the request while it is being read.
//
// Stop() is graceful: the listener closes at once, connections in the handshake or between
// requests close at once, requests in flight finish (up to `shutdown_grace`; then they are
// closed).
//
// Thread-safety: the handler runs on the loop threads, concurrently when there are several, and
// must then be thread-safe; it should return quickly: while it runs, the other connections of its
// loop wait. Start/Stop/port from any thread.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/httpserver/connection_metrics.h"
#include "lib/httpserver/request.h"
#include "lib/httpserver/request_budget.h"
#include "lib/metrics/metrics.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace dra::httpserver {

struct ServerOptions {
  // "host:port", "[v6]:port" or ":port" (all interfaces, IPv6 and IPv4); port 0 picks one. See
  // Listen() in listen.h.
  std::string address;
  // TLS when set: called at each accepted connection for its context, so that a rotated
  // certificate is used by the next connection. Plain TCP when empty.
  std::function<std::shared_ptr<SSL_CTX>()> tls_context;
  // False: every response says `Connection: close` and ends its connection.
  bool keep_alive = true;
  size_t max_body_bytes = 3 << 20;
  size_t max_header_bytes = 64 << 10;
  // Request buffers and large responses of all connections together; when non-zero, at least
  // max_header_bytes + max_body_bytes (one largest request), else Start fails. Zero: no budget
  // (and no budget metrics).
  size_t max_buffered_request_bytes = 0;
  // Who and which setting the 503 of a full budget names.
  std::string budget_owner = "server";
  std::string budget_setting = "max_buffered_request_bytes";
  absl::Duration handshake_timeout = absl::Seconds(5);
  absl::Duration request_timeout = absl::Seconds(8);
  absl::Duration idle_timeout = absl::Seconds(120);
  absl::Duration write_timeout = absl::Seconds(10);
  int max_connections = 2048;
  // Event loop threads; 0: the number of CPUs, at least 2 and at most 4 (each costs a thread).
  int loop_threads = 0;
  // The name of the loop threads (/proc/<pid>/task/<tid>/comm; at most 15 bytes).
  std::string thread_name = "http-loop";
  // Names the server in its log lines.
  std::string log_name = "http server";
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Connection metrics (connection_metrics.h) and the budget's are registered here when set.
  metrics::Registry* registry = nullptr;
  std::string metrics_prefix = "nvidia_dra_http_server";
};

class EventLoop;

class Server {
 public:
  // Binds, listens and starts serving. Errors name the address and what is allowed.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options, HttpHandler handler);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Idempotent; a second caller waits for the first to finish.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  int port() const { return port_; }
  const ConnectionMetrics& connection_metrics() const { return metrics_; }
  const RequestBudget& request_budget() const { return budget_; }

 private:
  Server(ServerOptions options, HttpHandler handler, int listen_fd, int port);
  bool Stopping() const { return stopping_flag_.load(std::memory_order_relaxed); }

  const ServerOptions options_;
  const HttpHandler handler_;
  const int listen_fd_;
  const int port_;
  ConnectionMetrics metrics_;
  RequestBudget budget_;
  std::atomic<int> open_{0};  // connections accepted and not closed, all loops together
  std::atomic<bool> stopping_flag_{false};
  std::atomic<bool> force_close_{false};  // the grace period is over
  std::vector<std::unique_ptr<EventLoop>> loops_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;

  friend class EventLoop;
};

}  // namespace dra::httpserver
