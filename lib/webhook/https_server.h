#pragma once

// A small HTTPS/1.1 server for the admission webhook: OpenSSL over blocking sockets, one thread
// per connection, keep-alive (the API server reuses its connections), Content-Length bodies up
// to a bound (413 beyond), an idle timeout between requests and a read timeout within one.
// "Expect: 100-continue" is answered; chunked bodies are refused (501): the API server sends
// Content-Length.
//
// The certificate comes from a ServingCertificate at each accepted connection, so a rotated
// certificate is used by the next connection.
//
// Stop() is graceful: the listener closes, idle connections close at once, requests in flight
// finish (up to `shutdown_grace`; then their sockets are shut down).
//
// Start() sets SIGPIPE to be ignored process-wide: OpenSSL writes to sockets with write(2).
//
// Thread-safety: the handler runs concurrently on connection threads and must be thread-safe.
// Start/Stop/port from any thread.

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/webhook/tls_certs.h"

namespace dra::webhook {

class Connection;
struct ConnectionThreads;

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
  // Waiting for the next request on a kept-alive connection (also for the first one).
  absl::Duration idle_timeout = absl::Seconds(120);
  // Handshake, and from the first byte of a request to its last.
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  int max_connections = 1024;
  absl::Duration shutdown_grace = absl::Seconds(10);
};

class HttpsServer {
 public:
  // Binds, listens and starts accepting. `certs` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpsServer>> Start(HttpsServerOptions options,
                                                            ServingCertificate* certs,
                                                            HttpsHandler handler);
  ~HttpsServer();  // Stop()
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  int port() const { return port_; }

 private:
  HttpsServer(HttpsServerOptions options, ServingCertificate* certs, HttpsHandler handler,
              int listen_fd, int wake_fd, int port);
  void AcceptLoop();
  void ServeConnection(int fd, std::shared_ptr<SSL_CTX> ctx);
  bool Stopping() const { return stopping_flag_.load(std::memory_order_relaxed); }
  bool Drained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_.empty(); }

  const HttpsServerOptions options_;
  ServingCertificate* const certs_;
  const HttpsHandler handler_;
  const int listen_fd_;
  const int wake_fd_;  // eventfd, readable once Stop begins
  const int port_;
  std::thread accept_thread_;
  std::unique_ptr<ConnectionThreads> threads_;
  std::atomic<bool> stopping_flag_{false};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::set<int> connections_ ABSL_GUARDED_BY(mu_);  // sockets of live connection threads

  friend class Connection;
};

// "OK", "Not Found", ... for the status codes this server writes.
absl::string_view HttpReasonPhrase(int code);

}  // namespace dra::webhook
