#pragma once

// A small HTTPS/1.1 server for the admission webhook: OpenSSL over non-blocking sockets driven
// by a few epoll loops, keep-alive (the API server reuses its connections), Content-Length bodies
// up to a bound (413 beyond). "Expect: 100-continue" is answered; chunked bodies are refused
// (501): the API server sends Content-Length.
//
// Slow clients cannot stall it. Any pod can reach the webhook, and under `failurePolicy: Fail`
// a stalled webhook blocks claim creation cluster-wide, so:
//   - no socket operation blocks: a connection that sends slowly or not at all only holds its
//     own small state, and the loop serves the others meanwhile;
//   - every connection has overall deadlines, not per-read timeouts that each byte renews: the
//     TLS handshake must end within `handshake_timeout` of accept, the first request must be
//     fully read within `request_timeout` of the handshake's end, a later one within
//     `request_timeout` of its first byte; between requests a connection may idle for
//     `idle_timeout`; a response must be taken within `write_timeout`. When a deadline passes the
//     connection is closed (a partly received request gets a 408 first) and counted in
//     <prefix>_connections_timed_out_total{phase};
//   - at most `max_connections` are open; more are accepted and closed at once
//     (<prefix>_connections_rejected_total).
// Memory is bounded across connections, not only per connection: request buffers (and responses
// over 1 KiB, held until the client takes them) come from one budget of
// `max_buffered_request_bytes` for all connections together (request_budget.h). A request's whole
// buffer is taken once its header says how large it is, before its body is read; a request or
// response that does not fit is answered 503 and its connection closed
// (<prefix>_request_buffer_refused_total; <prefix>_request_buffer_bytes is the budget in use).
// A connection costs about 200 bytes until its ClientHello has fully arrived (it is peeked, not
// read, until then), about 42 KiB of OpenSSL state during the handshake (measured), its
// OpenSSL connection state between requests (not measured; the record buffers are released),
// plus the request while it is being read.
//
// The certificate comes from a ServingCertificate at each accepted connection, so a rotated
// certificate is used by the next connection.
//
// Stop() is graceful: the listener closes at once, connections in the handshake or between
// requests close at once, requests in flight finish (up to `shutdown_grace`; then they are
// closed).
//
// Start() sets SIGPIPE to be ignored process-wide: OpenSSL writes to sockets with write(2).
//
// Thread-safety: the handler runs on the loop threads, concurrently, and must be thread-safe; it
// should return quickly (the review handler takes about 10 µs): while it runs, the other
// connections of its loop wait. Start/Stop/port from any thread.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/metrics/connection_metrics.h"
#include "lib/metrics/metrics.h"
#include "lib/webhook/request_budget.h"
#include "lib/webhook/tls_certs.h"

namespace dra::webhook {

// The kube-apiserver gives up on a webhook call after the webhook's timeoutSeconds (default 10 s,
// which the chart keeps; at most 30 s) for connect, handshake, request and response together, so
// a legitimate caller never needs longer than these; a client that does is holding a slot.
inline constexpr absl::Duration kHandshakeTimeout = absl::Seconds(5);
inline constexpr absl::Duration kRequestTimeout = absl::Seconds(8);
inline constexpr absl::Duration kWriteTimeout = absl::Seconds(10);
// Between requests on a kept-alive connection. Longer than the API server's 90 s idle connection
// timeout, so that it closes first: it does not retry a POST on a connection we closed under it.
inline constexpr absl::Duration kIdleTimeout = absl::Seconds(120);
// Open connections at most. The API servers use a handful; the rest is room for slow clients.
inline constexpr int kMaxConnections = 2048;
// The default budget of request buffers, all connections together: 21 requests of the largest
// size (3 MiB) at once, or thousands of typical reviews (2-20 KiB).
inline constexpr size_t kMaxBufferedRequestBytes = 64 << 20;
// The name of the epoll loop threads (/proc/<pid>/task/<tid>/comm; at most 15 bytes).
inline constexpr char kLoopThreadName[] = "https-loop";

struct HttpRequest {
  absl::string_view method;
  absl::string_view path;  // request target without the query string
  absl::string_view content_type;
  absl::string_view body;
};

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpsHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpsServerOptions {
  // "host:port", "[v6]:port" or ":port" (all interfaces, IPv6 and IPv4); port 0 picks one.
  std::string address = ":443";
  size_t max_body_bytes = 3 << 20;
  size_t max_header_bytes = 64 << 10;
  // Request buffers and large responses of all connections together; at least
  // max_header_bytes + max_body_bytes (one largest request), else Start fails.
  size_t max_buffered_request_bytes = kMaxBufferedRequestBytes;
  absl::Duration handshake_timeout = kHandshakeTimeout;
  absl::Duration request_timeout = kRequestTimeout;
  absl::Duration idle_timeout = kIdleTimeout;
  absl::Duration write_timeout = kWriteTimeout;
  int max_connections = kMaxConnections;
  // Event loop threads; 0: the number of CPUs, at least 2 and at most 4 (each costs a thread).
  int loop_threads = 0;
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Connection metrics (lib/metrics/connection_metrics.h) are registered here when set.
  metrics::Registry* registry = nullptr;
  std::string metrics_prefix = "nvidia_dra_webhook";
};

class EventLoop;

class HttpsServer {
 public:
  // Binds, listens and starts serving. `certs` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpsServer>> Start(HttpsServerOptions options,
                                                            ServingCertificate* certs,
                                                            HttpsHandler handler);
  ~HttpsServer();  // Stop()
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  int port() const { return port_; }
  const metrics::ConnectionMetrics& connection_metrics() const { return metrics_; }
  const RequestBudget& request_budget() const { return budget_; }

 private:
  HttpsServer(HttpsServerOptions options, ServingCertificate* certs, HttpsHandler handler,
              int listen_fd, int port);
  bool Stopping() const { return stopping_flag_.load(std::memory_order_relaxed); }

  const HttpsServerOptions options_;
  ServingCertificate* const certs_;
  const HttpsHandler handler_;
  const int listen_fd_;
  const int port_;
  metrics::ConnectionMetrics metrics_;
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

// "OK", "Not Found", ... for the status codes this server writes.
absl::string_view HttpReasonPhrase(int code);

}  // namespace dra::webhook
