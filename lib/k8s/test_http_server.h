#pragma once

// Test support for the HTTP transport's own tests: certificates made on the fly (a CA and leaf
// certificates signed by it) and a loopback HTTP/1.1 server, plain or TLS, whose per-connection
// behaviour is a test-supplied function, so that tests can answer with keep-alive, chunked
// streams, malformed bytes, silence or an abrupt close.

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace dra::k8s::testing {

struct Pem {
  std::string cert;
  std::string key;
};

// A self-signed CA that issues certificates valid from an hour ago for a day.
class TestCa {
 public:
  explicit TestCa(const std::string& common_name);
  ~TestCa();
  const std::string& cert_pem() const { return pem_.cert; }
  // `sans`: subjectAltName entries such as "IP:127.0.0.1,DNS:localhost" (may be empty).
  Pem IssueServer(const std::string& common_name, const std::string& sans) const;
  Pem IssueClient(const std::string& common_name) const;

 private:
  Pem Issue(const std::string& common_name, const std::string& sans, bool client) const;
  void* key_ = nullptr;   // EVP_PKEY*
  void* cert_ = nullptr;  // X509*
  Pem pem_;
};

// One accepted connection, as the handler sees it.
class ServerConn {
 public:
  // Reads one request (head and a Content-Length body); false when the client closed.
  bool ReadRequest(std::string* head, std::string* body = nullptr);
  void Write(absl::string_view bytes);
  // Blocks until the client closes the connection (or the server shuts down).
  void WaitForClose();
  const std::string& sni() const { return sni_; }
  int index() const { return index_; }  // 0 for the server's first connection, 1 for the next...

 private:
  friend class TestHttpServer;
  ssize_t RawRead(char* buf, size_t n);
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  int index_ = 0;
  std::string sni_;
  std::string buffered_;
};

class TestHttpServer {
 public:
  using Handler = std::function<void(ServerConn&)>;
  struct Tls {
    Pem server;                 // empty cert: plain HTTP
    std::string client_ca_pem;  // set: clients must present a certificate signed by it
  };
  explicit TestHttpServer(Handler handler, Tls tls = {});
  ~TestHttpServer();

  std::string url() const;  // "http://127.0.0.1:PORT" or "https://127.0.0.1:PORT"
  int connections() const { return accepted_.load(); }
  int closed() const { return closed_.load(); }  // connections whose handler has finished

  // An answer with a Content-Length body; `headers` lines end in "\r\n".
  static std::string Response(int code, absl::string_view body, absl::string_view headers = "");

 private:
  void Serve();
  Handler handler_;
  SSL_CTX* ctx_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<int> closed_{0};
  std::thread accept_thread_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra::k8s::testing
