#pragma once

// Test and benchmark helpers for the webhook: a throw-away PKI made with the OpenSSL API (a CA
// and server certificates for given IPs/DNS names, EC P-256) and a blocking HTTPS/1.1 client that
// keeps its connection alive. Not for production use: keys are unprotected and short-lived.
//
// Thread-safety: free functions are thread-safe; a TlsClient is used by one thread at a time.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace dra::webhook::testing {

struct Pem {
  std::string cert;
  std::string key;
};

// A self-signed CA certificate valid from an hour ago for a day.
absl::StatusOr<Pem> GenerateCa(absl::string_view common_name);
// The key of a generated server certificate.
enum class KeyType { kEcP256, kRsa2048 };

// A server certificate signed by `ca` with the given subjectAltNames: entries that parse as IP
// addresses become IP SANs, others DNS SANs.
absl::StatusOr<Pem> GenerateServerCert(const Pem& ca, absl::string_view common_name,
                                       const std::vector<std::string>& sans,
                                       KeyType key_type = KeyType::kEcP256);

// One TLS 1.2 handshake with 127.0.0.1:`port`, offering only `tls12_ciphers` (an OpenSSL cipher
// list) and no TLS 1.3; the server's certificate is not verified. Returns the negotiated suite's
// OpenSSL name, or the handshake's error.
absl::StatusOr<std::string> Tls12Handshake(int port, absl::string_view tls12_ciphers);

// The subject common name of a PEM certificate.
absl::StatusOr<std::string> CommonNameOf(absl::string_view cert_pem);

struct ClientResponse {
  int code = 0;
  std::string content_type;
  std::string body;
  bool connection_close = false;
};

class TlsClient {
 public:
  // Connects to 127.0.0.1:`port` (or to `host` when it is an IPv4 or IPv6 literal), verifying the
  // server certificate against `ca_pem` and `host` (an IP or DNS name).
  static absl::StatusOr<std::unique_ptr<TlsClient>> Connect(int port, absl::string_view ca_pem,
                                                            absl::string_view host = "127.0.0.1");
  ~TlsClient();
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // Sends one request on the kept-alive connection and reads its response. `extra_headers` are
  // whole lines ending in "\r\n". No Content-Type header when `content_type` is empty.
  absl::StatusOr<ClientResponse> Do(absl::string_view method, absl::string_view path,
                                    absl::string_view content_type, absl::string_view body,
                                    absl::string_view extra_headers = "");
  // Writes raw bytes / reads one response (for malformed-request tests).
  absl::Status WriteRaw(absl::string_view data);
  // `head`: the answer to a HEAD request, which has no body whatever its Content-Length.
  // `interim`: return a "100 Continue" instead of skipping it.
  absl::StatusOr<ClientResponse> ReadResponse(bool head = false, bool interim = false);

  // The common name of the certificate the server presented.
  std::string PeerCommonName() const;
  // The socket, e.g. to poll(2) it.
  int fd() const { return fd_; }

 private:
  TlsClient(int fd, SSL_CTX* ctx, SSL* ssl) : fd_(fd), ctx_(ctx), ssl_(ssl) {}

  int fd_;
  SSL_CTX* ctx_;
  SSL* ssl_;
  std::string buf_;
  std::string out_;
};

}  // namespace dra::webhook::testing
