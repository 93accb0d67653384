#pragma once

// One client connection to an HTTP server: TCP, optionally wrapped in TLS (OpenSSL). Blocking
// calls with deadlines built on a non-blocking socket and poll(), so that a caller can wait in
// slices (a watch polls its stop flag about once a second).
//
// Not thread-safe: a connection is used by one request at a time (the transport's pool hands it
// out exclusively).

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace dra::k8s {

// Where to connect, from a server URL such as "https://127.0.0.1:6443" or "http://[::1]:8080/x".
struct Endpoint {
  bool tls = true;
  std::string host;  // without IPv6 brackets
  int port = 443;
  std::string base_path;  // "" or "/x": prepended to every request path
  std::string authority;  // "host:port" as written for the Host header
};
absl::StatusOr<Endpoint> ParseServerUrl(absl::string_view url);

// What the TLS side of every connection to one server uses.
struct TlsOptions {
  std::string ca_pem;  // trusted CAs; empty: the system trust store
  bool insecure_skip_verify = false;
  std::string client_cert_pem;  // certificate, optionally followed by its chain
  std::string client_key_pem;
  std::string server_name;  // SNI and the name verified; empty: the endpoint's host
};

// An SSL_CTX configured from TlsOptions, shared by all connections to one server.
class TlsContext {
 public:
  // Errors name what could not be loaded ("client key is not valid PEM", "CA data has no
  // certificate", "client key does not match the client certificate").
  static absl::StatusOr<std::shared_ptr<TlsContext>> Create(const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ctx() const { return ctx_; }
  const TlsOptions& options() const { return options_; }

 private:
  TlsContext(SSL_CTX* ctx, TlsOptions options) : ctx_(ctx), options_(std::move(options)) {}
  SSL_CTX* ctx_;
  TlsOptions options_;
};

// TCP keepalive on every connection, so that a peer gone without a close (a silent network
// failure, a vanished host) is noticed in about a minute instead of the kernel's default of over
// two hours: probes after 30 s without traffic, every 10 s, the connection ends after 3 unanswered
// (client-go's dialer also probes after 30 s). Sent data unacknowledged for 60 s also ends it
// (TCP_USER_TIMEOUT), which keepalive alone does not cover while a write is outstanding.
inline constexpr absl::Duration kTcpKeepaliveIdle = absl::Seconds(30);
inline constexpr absl::Duration kTcpKeepaliveInterval = absl::Seconds(10);
inline constexpr int kTcpKeepaliveCount = 3;
inline constexpr absl::Duration kTcpUserTimeout = absl::Seconds(60);

class Connection {
 public:
  // Connects (TCP, then the TLS handshake when `tls` is set) before `deadline`. Errors are
  // Unavailable ("connect to 127.0.0.1:1: connection refused", "TLS handshake with
  // 127.0.0.1:6443: server certificate verify failed: self-signed certificate") or
  // DeadlineExceeded ("connect to ...: timed out").
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const Endpoint& endpoint,
                                                          const TlsContext* tls,
                                                          absl::Time deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Writes all of `data` before `deadline`. `*sent` tells whether any byte left (for retries).
  absl::Status WriteAll(absl::string_view data, absl::Time deadline, bool* sent);

  enum class ReadResult { kData, kEof, kTimeout };
  // Reads what is available (waiting until `deadline` for something): kData with *n > 0 bytes,
  // kEof when the peer closed, kTimeout when the deadline passed with nothing to read.
  absl::StatusOr<ReadResult> Read(char* buf, size_t size, absl::Time deadline, size_t* n);

  // For a pooled connection before reuse: true when the peer closed it (or sent something
  // unsolicited) while it sat idle, so it must not carry a request.
  bool ClosedWhileIdle();

  const std::string& peer() const { return peer_; }  // "host:port" for messages
  int fd() const { return fd_; }                     // the socket, for tests of its options
  absl::Time idle_since = absl::InfinitePast();      // set by the pool

 private:
  Connection(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  absl::Status Handshake(const TlsContext& tls, const Endpoint& endpoint, absl::Time deadline);
  // Waits for the socket to become readable (`events` POLLIN) or writable (POLLOUT).
  absl::StatusOr<bool> Wait(short events, absl::Time deadline);
  absl::Status TlsError(absl::string_view during, int ssl_error);
  absl::Status AlertOr(absl::Status write_error);

  int fd_;
  SSL* ssl_ = nullptr;
  std::string peer_;
};

}  // namespace dra::k8s
