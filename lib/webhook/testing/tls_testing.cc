#include "lib/webhook/testing/tls_testing.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/common/status.h"
#include "lib/webhook/tls_certs.h"

namespace dra::webhook::testing {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct CertFree {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

absl::Status SslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", TakeOpenSslErrors()));
}

std::string BioString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n);
}

absl::StatusOr<CertPtr> ReadCert(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  CertPtr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) return SslError("read certificate");
  return cert;
}

absl::StatusOr<KeyPtr> ReadKey(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) return SslError("read key");
  return key;
}

absl::Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return SslError(absl::StrCat("extension ", value));
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return absl::OkStatus();
}

// Builds and signs a certificate for `key`; self-signed when issuer is null.
absl::StatusOr<Pem> MakeCert(EVP_PKEY* key, absl::string_view cn, X509* issuer,
                             EVP_PKEY* issuer_key, bool is_ca, const std::string& sans) {
  CertPtr cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24L * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  std::string cn_str(cn);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn_str.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (is_ca) {
    RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
    RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_subject_key_identifier, "hash"));
  } else {
    RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    RETURN_IF_ERROR(
        AddExt(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment"));
    RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_ext_key_usage, "serverAuth"));
    if (!sans.empty()) {
      RETURN_IF_ERROR(AddExt(cert.get(), signer, NID_subject_alt_name, sans));
    }
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return SslError("sign certificate");
  }
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cert_bio.get(), cert.get());
  PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return Pem{BioString(cert_bio.get()), BioString(key_bio.get())};
}

}  // namespace

absl::StatusOr<Pem> GenerateCa(absl::string_view common_name) {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return SslError("generate key");
  return MakeCert(key.get(), common_name, nullptr, nullptr, /*is_ca=*/true, "");
}

absl::StatusOr<Pem> GenerateServerCert(const Pem& ca, absl::string_view common_name,
                                       const std::vector<std::string>& sans, KeyType key_type) {
  ASSIGN_OR_RETURN(CertPtr ca_cert, ReadCert(ca.cert));
  ASSIGN_OR_RETURN(KeyPtr ca_key, ReadKey(ca.key));
  KeyPtr key(key_type == KeyType::kRsa2048 ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256"));
  if (key == nullptr) return SslError("generate key");
  std::vector<std::string> entries;
  for (const std::string& san : sans) {
    unsigned char buf[16];
    bool ip =
        inet_pton(AF_INET, san.c_str(), buf) == 1 || inet_pton(AF_INET6, san.c_str(), buf) == 1;
    entries.push_back(absl::StrCat(ip ? "IP:" : "DNS:", san));
  }
  return MakeCert(key.get(), common_name, ca_cert.get(), ca_key.get(), /*is_ca=*/false,
                  absl::StrJoin(entries, ","));
}

absl::StatusOr<std::string> CommonNameOf(absl::string_view cert_pem) {
  ASSIGN_OR_RETURN(CertPtr cert, ReadCert(cert_pem));
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, buf, sizeof(buf));
  return std::string(buf);
}

absl::StatusOr<std::unique_ptr<TlsClient>> TlsClient::Connect(int port, absl::string_view ca_pem,
                                                              absl::string_view host) {
  std::string host_str(host);
  // An IPv6 literal ("::1") connects over IPv6; anything else that is not an IPv4 literal
  // ("localhost", DNS names) connects to 127.0.0.1.
  sockaddr_storage addr{};
  socklen_t addr_len = sizeof(sockaddr_in);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET6, host_str.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    addr_len = sizeof(sockaddr_in6);
  } else {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    if (inet_pton(AF_INET, host_str.c_str(), &v4->sin_addr) != 1) {
      v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) {
    absl::Status s = ErrnoToStatus(errno, absl::StrCat("connect to ", host_str, " port ", port));
    ::close(fd);
    return s;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  absl::StatusOr<CertPtr> ca = ReadCert(ca_pem);
  if (!ca.ok()) {
    SSL_CTX_free(ctx);
    ::close(fd);
    return ca.status();
  }
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca->get());
  SSL* ssl = SSL_new(ctx);
  std::unique_ptr<TlsClient> client(new TlsClient(fd, ctx, ssl));
  unsigned char ipbuf[16];
  if (inet_pton(AF_INET, host_str.c_str(), ipbuf) == 1 ||
      inet_pton(AF_INET6, host_str.c_str(), ipbuf) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host_str.c_str());
  } else {
    SSL_set1_host(ssl, host_str.c_str());
    SSL_set_tlsext_host_name(ssl, host_str.c_str());
  }
  static constexpr unsigned char kAlpn[] = "\x08http/1.1";
  SSL_set_alpn_protos(ssl, kAlpn, sizeof(kAlpn) - 1);
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) != 1) return SslError("TLS handshake");
  return client;
}

absl::StatusOr<std::string> Tls12Handshake(int port, absl::string_view tls12_ciphers) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = ErrnoToStatus(errno, absl::StrCat("connect to port ", port));
    ::close(fd);
    return s;
  }
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_2_VERSION);
  // Security level 0: also suites the default level would not offer (the server is what refuses).
  SSL_CTX_set_security_level(ctx.get(), 0);
  if (SSL_CTX_set_cipher_list(ctx.get(), std::string(tls12_ciphers).c_str()) != 1) {
    ::close(fd);
    return SslError(absl::StrCat("cipher list ", tls12_ciphers));
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  absl::StatusOr<std::string> out = std::string();
  if (SSL_connect(ssl.get()) != 1) {
    out = SslError("TLS handshake");
  } else {
    out = std::string(SSL_get_cipher_name(ssl.get()));
    SSL_shutdown(ssl.get());
  }
  ssl.reset();
  ::close(fd);
  ERR_clear_error();
  return out;
}

TlsClient::~TlsClient() {
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }
  SSL_CTX_free(ctx_);
  ::close(fd_);
  ERR_clear_error();
}

absl::Status TlsClient::WriteRaw(absl::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    int n = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
    if (n <= 0) return SslError("write");
    off += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<ClientResponse> TlsClient::ReadResponse(bool head_request, bool interim) {
  auto read_more = [this]() -> absl::Status {
    char chunk[16384];
    int n = SSL_read(ssl_, chunk, sizeof(chunk));
    if (n <= 0) {
      int err = SSL_get_error(ssl_, n);
      ERR_clear_error();
      return absl::UnavailableError(err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL
                                        ? "connection closed by the server"
                                        : "read failed");
    }
    buf_.append(chunk, n);
    return absl::OkStatus();
  };
  while (true) {
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) RETURN_IF_ERROR(read_more());
    ClientResponse resp;
    absl::string_view head(buf_.data(), end);
    std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
    std::vector<absl::string_view> status = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
    if (status.size() < 2 || !absl::SimpleAtoi(status[1], &resp.code)) {
      return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
    }
    size_t length = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos) continue;
      absl::string_view name = lines[i].substr(0, colon);
      absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "content-length")) {
        if (!absl::SimpleAtoi(value, &length)) return absl::DataLossError("bad Content-Length");
      } else if (absl::EqualsIgnoreCase(name, "content-type")) {
        resp.content_type = std::string(value);
      } else if (absl::EqualsIgnoreCase(name, "connection")) {
        resp.connection_close = absl::EqualsIgnoreCase(value, "close");
      }
    }
    if (head_request) length = 0;
    size_t total = end + 4 + length;
    if (resp.code == 100) {  // interim response; the real one follows
      buf_.erase(0, end + 4);
      if (interim) return resp;
      continue;
    }
    while (buf_.size() < total) RETURN_IF_ERROR(read_more());
    resp.body = buf_.substr(end + 4, length);
    buf_.erase(0, total);
    return resp;
  }
}

absl::StatusOr<ClientResponse> TlsClient::Do(absl::string_view method, absl::string_view path,
                                             absl::string_view content_type, absl::string_view body,
                                             absl::string_view extra_headers) {
  out_.clear();
  absl::StrAppend(&out_, method, " ", path, " HTTP/1.1\r\nHost: webhook\r\n");
  if (!content_type.empty()) absl::StrAppend(&out_, "Content-Type: ", content_type, "\r\n");
  absl::StrAppend(&out_, "Content-Length: ", body.size(), "\r\n", extra_headers, "\r\n");
  out_.append(body.data(), body.size());
  RETURN_IF_ERROR(WriteRaw(out_));
  return ReadResponse(method == "HEAD");
}

std::string TlsClient::PeerCommonName() const {
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof(buf));
  X509_free(cert);
  return buf;
}

}  // namespace dra::webhook::testing
