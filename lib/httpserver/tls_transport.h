#pragma once

// The optional TLS layer of the server core (server.h, ServerOptions::tls_context): OpenSSL over
// a connection's non-blocking socket (transport.h).
//
// The SSL object is made once the client's first TLS record (its ClientHello) has fully arrived:
// until then the bytes stay in the socket (peeked, not read) and the connection waits
// edge-triggered for more, so a client that sends nothing or drips its ClientHello costs no
// OpenSSL memory (about 45 KiB per connection in the handshake otherwise). Bytes that are not a
// TLS handshake record end the connection.
//
// OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a server with TLS ignores SIGPIPE
// process-wide (Server::Start).
//
// Thread-safety: a TlsTransport is owned and used by one loop thread; TakeOpenSslErrors is
// thread-safe (OpenSSL's error queue is per thread).

#include <memory>
#include <string>

#include "lib/httpserver/transport.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace dra::httpserver {

class TlsTransport : public Transport {
 public:
  // Server side of a TLS connection on `fd` (owned by the caller) with `ctx`.
  TlsTransport(int fd, std::shared_ptr<SSL_CTX> ctx);
  ~TlsTransport() override;  // frees the SSL object
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;

  bool has_handshake() const override { return true; }
  Io Handshake(std::string* scratch) override;
  bool peeking() const override { return ssl_ == nullptr; }
  Io Read(char* buf, size_t len, size_t* n) override;
  Io Write(const char* buf, size_t len, size_t* n) override;
  bool HasPending() const override;
  void Shutdown() override;

 private:
  // True once the first TLS record is in the socket; *closed when it cannot be a ClientHello.
  bool ClientHelloArrived(std::string* scratch, bool* closed);
  // The outcome of an SSL_* call that returned `ret` <= 0.
  Io Wait(int ret, const char* what);

  const int fd_;
  std::shared_ptr<SSL_CTX> ctx_;  // until the SSL object exists
  SSL* ssl_ = nullptr;
};

// The OpenSSL error queue as one string ("error:0A000086:SSL routines::certificate verify
// failed; ..."), emptied; `fallback` when the queue is empty.
std::string TakeOpenSslErrors(const std::string& fallback = "unknown error");

}  // namespace dra::httpserver
