#include "lib/webhook/tls_certs.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::webhook {
namespace {

// ALPN: we speak http/1.1 only. The kube-apiserver's admission webhook client offers nothing else
// (docs/webhook.md "HTTP/2"); other Go clients offer h2 first and fall back to http/1.1.
int SelectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  static constexpr unsigned char kHttp11[] = "http/1.1";
  for (unsigned int i = 0; i < inlen;) {
    unsigned int len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == 8 && std::equal(in + i + 1, in + i + 1 + len, kHttp11)) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

// TLS 1.2: forward-secret AEAD suites only (ECDHE key exchange; the set Kubernetes components
// default to). No RSA key exchange, no DHE, no CBC. TLS 1.3's suites are all ECDHE/AEAD already
// and keep OpenSSL's default.
const char kTls12CipherList[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

absl::StatusOr<std::shared_ptr<SSL_CTX>> NewServerContext(const std::string& cert_file,
                                                          const std::string& key_file) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("create TLS context: ", TakeOpenSslErrors()));
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(ctx.get(), kTls12CipherList) != 1) {
    return absl::InternalError(absl::StrCat("set TLS 1.2 cipher list: ", TakeOpenSslErrors()));
  }
  SSL_CTX_set_alpn_select_cb(ctx.get(), SelectAlpn, nullptr);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("load certificate file ", cert_file, ": ", TakeOpenSslErrors()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("load private key file ", key_file, ": ", TakeOpenSslErrors()));
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("private key ", key_file,
                                                   " does not match certificate ", cert_file, ": ",
                                                   TakeOpenSslErrors()));
  }
  return ctx;
}

absl::StatusOr<std::unique_ptr<ServingCertificate>> ServingCertificate::Load(TlsFiles files) {
  // Stat before loading: a change during the load then shows up at the next check.
  ServingCertificate probe(files, nullptr, {});
  PairStamp stamp = probe.Stat();
  ASSIGN_OR_RETURN(std::shared_ptr<SSL_CTX> ctx, NewServerContext(files.cert_file, files.key_file));
  return std::unique_ptr<ServingCertificate>(
      new ServingCertificate(std::move(files), std::move(ctx), stamp));
}

ServingCertificate::ServingCertificate(TlsFiles files, std::shared_ptr<SSL_CTX> ctx,
                                       PairStamp stamp)
    : files_(std::move(files)),
      ctx_(std::move(ctx)),
      loaded_(stamp),
      next_check_(absl::Now() + files_.check_interval) {}

ServingCertificate::PairStamp ServingCertificate::Stat() const {
  auto stat_one = [](const std::string& path) {
    FileStamp s;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
      s.exists = true;
      s.dev = st.st_dev;
      s.ino = st.st_ino;
      s.size = st.st_size;
      s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    }
    return s;
  };
  return PairStamp{stat_one(files_.cert_file), stat_one(files_.key_file)};
}

std::shared_ptr<SSL_CTX> ServingCertificate::Current() {
  absl::MutexLock lock(&mu_);
  absl::Time now = absl::Now();
  if (now < next_check_) return ctx_;
  next_check_ = now + files_.check_interval;
  PairStamp stamp = Stat();
  if (stamp == loaded_ || stamp == failed_) return ctx_;
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx =
      NewServerContext(files_.cert_file, files_.key_file);
  if (!ctx.ok()) {
    failed_ = stamp;
    DRA_WARNING("serving certificate changed but could not be loaded; keeping the previous one",
                "err", ctx.status());
    return ctx_;
  }
  ctx_ = *std::move(ctx);
  loaded_ = stamp;
  failed_ = {};
  ++reloads_;
  DRA_INFO("reloaded serving certificate", "certFile", files_.cert_file, "keyFile",
           files_.key_file);
  return ctx_;
}

int ServingCertificate::reloads() const {
  absl::MutexLock lock(&mu_);
  return reloads_;
}

}  // namespace dra::webhook
