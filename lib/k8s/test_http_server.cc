#include "lib/k8s/test_http_server.h"

#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dra::k8s::testing {
namespace {

[[noreturn]] void Fatal(const std::string& what) {
  std::fprintf(stderr, "test_http_server: %s\n", what.c_str());
  ERR_print_errors_fp(stderr);
  std::abort();
}

std::string ToPem(X509* cert) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

std::string ToPem(EVP_PKEY* key) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string out(data, n);
  BIO_free(b);
  return out;
}

void AddExt(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) Fatal("extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `key`, signed by issuer (or self-signed when issuer is null).
X509* MakeCert(EVP_PKEY* key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, bool ca,
               const std::string& sans, bool client) {
  static std::atomic<long> serial{1};
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, X509_get_subject_name(issuer != nullptr ? issuer : x));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : x, x, nullptr, nullptr, 0);
  AddExt(x, &ctx, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  AddExt(x, &ctx, NID_key_usage,
         ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyEncipherment");
  AddExt(x, &ctx, NID_subject_key_identifier, "hash");
  if (!ca) {
    AddExt(x, &ctx, NID_authority_key_identifier, "keyid:always");
    AddExt(x, &ctx, NID_ext_key_usage, client ? "clientAuth" : "serverAuth");
  }
  if (!sans.empty()) AddExt(x, &ctx, NID_subject_alt_name, sans);
  if (X509_sign(x, issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) Fatal("sign");
  return x;
}

}  // namespace

TestCa::TestCa(const std::string& common_name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) Fatal("generate key");
  X509* cert = MakeCert(key, common_name, nullptr, nullptr, true, "", false);
  key_ = key;
  cert_ = cert;
  pem_ = {ToPem(cert), ToPem(key)};
}

TestCa::~TestCa() {
  X509_free(static_cast<X509*>(cert_));
  EVP_PKEY_free(static_cast<EVP_PKEY*>(key_));
}

Pem TestCa::Issue(const std::string& common_name, const std::string& sans, bool client) const {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) Fatal("generate key");
  X509* cert = MakeCert(key, common_name, static_cast<X509*>(cert_), static_cast<EVP_PKEY*>(key_),
                        false, sans, client);
  Pem pem{ToPem(cert), ToPem(key)};
  X509_free(cert);
  EVP_PKEY_free(key);
  return pem;
}

Pem TestCa::IssueServer(const std::string& common_name, const std::string& sans) const {
  return Issue(common_name, sans, false);
}

Pem TestCa::IssueClient(const std::string& common_name) const {
  return Issue(common_name, "", true);
}

ssize_t ServerConn::RawRead(char* buf, size_t n) {
  if (ssl_ != nullptr) {
    int r = SSL_read(ssl_, buf, static_cast<int>(n));
    return r > 0 ? r : 0;
  }
  ssize_t r = ::read(fd_, buf, n);
  return r > 0 ? r : 0;
}

bool ServerConn::ReadRequest(std::string* head, std::string* body) {
  char buf[4096];
  size_t end;
  while ((end = buffered_.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = RawRead(buf, sizeof(buf));
    if (n <= 0) return false;
    buffered_.append(buf, n);
  }
  *head = buffered_.substr(0, end);
  buffered_.erase(0, end + 4);
  size_t length = 0;
  for (absl::string_view line : absl::StrSplit(*head, "\r\n")) {
    std::string lower = absl::AsciiStrToLower(line);
    if (absl::StartsWith(lower, "content-length:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &length);
    }
  }
  while (buffered_.size() < length) {
    ssize_t n = RawRead(buf, sizeof(buf));
    if (n <= 0) return false;
    buffered_.append(buf, n);
  }
  if (body != nullptr) *body = buffered_.substr(0, length);
  buffered_.erase(0, length);
  return true;
}

void ServerConn::Write(absl::string_view bytes) {
  if (ssl_ != nullptr) {
    SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
    return;
  }
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(n);
  }
}

void ServerConn::WaitForClose() {
  char buf[4096];
  while (RawRead(buf, sizeof(buf)) > 0) {
  }
}

TestHttpServer::TestHttpServer(Handler handler, Tls tls) : handler_(std::move(handler)) {
  signal(SIGPIPE, SIG_IGN);
  if (!tls.server.cert.empty()) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    BIO* b = BIO_new_mem_buf(tls.server.cert.data(), static_cast<int>(tls.server.cert.size()));
    X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    b = BIO_new_mem_buf(tls.server.key.data(), static_cast<int>(tls.server.key.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    if (SSL_CTX_use_certificate(ctx_, cert) != 1 || SSL_CTX_use_PrivateKey(ctx_, key) != 1) {
      Fatal("server certificate");
    }
    X509_free(cert);
    EVP_PKEY_free(key);
    if (!tls.client_ca_pem.empty()) {
      b = BIO_new_mem_buf(tls.client_ca_pem.data(), static_cast<int>(tls.client_ca_pem.size()));
      X509* ca = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
      BIO_free(b);
      X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_), ca);
      X509_free(ca);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    }
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Fatal("bind");
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  ::listen(listen_fd_, 16);
  accept_thread_ = std::thread([this] { Serve(); });
}

TestHttpServer::~TestHttpServer() {
  ::shutdown(listen_fd_, SHUT_RDWR);
  accept_thread_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // wakes handlers blocked in a read
    threads = std::move(threads_);
  }
  for (auto& t : threads) t.join();
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

std::string TestHttpServer::url() const {
  return absl::StrCat(ctx_ != nullptr ? "https" : "http", "://127.0.0.1:", port_);
}

std::string TestHttpServer::Response(int code, absl::string_view body, absl::string_view headers) {
  return absl::StrCat("HTTP/1.1 ", code, " X\r\nContent-Type: application/json\r\n", headers,
                      "Content-Length: ", body.size(), "\r\n\r\n", body);
}

void TestHttpServer::Serve() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    int index = accepted_++;
    absl::MutexLock lock(&mu_);
    fds_.push_back(fd);
    threads_.emplace_back([this, fd, index] {
      ServerConn conn;
      conn.fd_ = fd;
      conn.index_ = index;
      bool ok = true;
      if (ctx_ != nullptr) {
        conn.ssl_ = SSL_new(ctx_);
        SSL_set_fd(conn.ssl_, fd);
        ok = SSL_accept(conn.ssl_) == 1;
        const char* sni = SSL_get_servername(conn.ssl_, TLSEXT_NAMETYPE_host_name);
        if (sni != nullptr) conn.sni_ = sni;
        ERR_clear_error();
      }
      if (ok) handler_(conn);
      if (conn.ssl_ != nullptr) SSL_free(conn.ssl_);
      ::shutdown(fd, SHUT_RDWR);
      {
        absl::MutexLock l(&mu_);
        ::close(fd);
        std::erase(fds_, fd);
      }
      ++closed_;
    });
  }
}

}  // namespace dra::k8s::testing
