#pragma once

// A minimal HTTP/1.1 server for the operational endpoints of our daemons: /metrics, /healthz,
// /readyz. Plain TCP, `Connection: close`, GET and HEAD only.
//
// Slow clients cannot stall it (a liveness probe must get through whatever else connects): one
// thread runs an epoll loop over non-blocking sockets, so connections are served concurrently;
// each connection has an overall deadline to deliver its request header (kRequestTimeout, from
// accept) and one to take the response (kWriteTimeout), and is closed when it passes; at most
// kMaxConnections are open, more are accepted and closed at once. A connection costs a socket,
// about 270 bytes of bookkeeping and its request (at most 16 KiB, typically under 200 bytes) and
// response while they are in flight: 1000 slow connections added 268 KiB to the test process.
//
// Thread-safety: handlers run on the server's own thread, one at a time, so a slow handler delays
// the others (they are expected to take microseconds). Start/Stop from any one thread.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/metrics/connection_metrics.h"
#include "lib/metrics/metrics.h"

namespace dra::metrics {

// From accept to the end of the request header. Probes send theirs at once; the kubelet's probe
// timeout defaults to 1 s and Prometheus' scrape timeout to 10 s.
inline constexpr absl::Duration kRequestTimeout = absl::Seconds(5);
// For the client to take the whole response (a large /metrics page to a slow scraper).
inline constexpr absl::Duration kWriteTimeout = absl::Seconds(10);
// Open connections at most; 1000 slow clients leave room for the probes.
inline constexpr int kMaxConnections = 2048;

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse()>;

struct HttpServerOptions {
  // ":port" (all interfaces, IPv6 and IPv4), "host:port" (IPv4) or "[v6]:port"; port 0 picks a
  // free port. See Listen() in lib/metrics/listen.h.
  std::string address;
  absl::Duration request_timeout = kRequestTimeout;
  absl::Duration write_timeout = kWriteTimeout;
  int max_connections = kMaxConnections;
  // Connection metrics (connection_metrics.h) are registered here when set.
  Registry* registry = nullptr;
  std::string metrics_prefix = "nvidia_dra_http_endpoint";
};

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, std::map<std::string, HttpHandler> handlers);
  // Start({.address = address}, handlers).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& address, std::map<std::string, HttpHandler> handlers);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Closes the listener and every connection; idempotent.
  void Stop();
  int port() const { return port_; }
  const ConnectionMetrics& connection_metrics() const { return metrics_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn;

  HttpServer(HttpServerOptions options, std::map<std::string, HttpHandler> handlers, int listen_fd,
             int port, int epoll_fd, int wake_fd);
  void Loop();
  void Accept();
  void OnReadable(Conn* c);
  void OnWritable(Conn* c);
  void Answer(Conn* c);
  void SetDeadline(Conn* c, Clock::time_point deadline);
  void Close(Conn* c);

  const HttpServerOptions options_;
  const std::map<std::string, HttpHandler> handlers_;
  ConnectionMetrics metrics_;
  int listen_fd_;
  const int port_;
  const int epoll_fd_;
  const int wake_fd_;  // eventfd, readable once Stop begins
  std::thread thread_;

  // Owned by the loop thread.
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // by socket
  std::set<std::pair<Clock::time_point, int>> deadlines_;
  bool accepting_ = true;
  Clock::time_point accept_resume_;  // after running out of file descriptors
};

}  // namespace dra::metrics
