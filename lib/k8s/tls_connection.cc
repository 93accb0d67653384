#include "lib/k8s/tls_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace dra::k8s {
namespace {

std::string ErrnoText(int err) { return absl::AsciiStrToLower(std::strerror(err)); }

bool IsIpLiteral(const std::string& host) {
  in6_addr buf;
  return inet_pton(AF_INET, host.c_str(), &buf) == 1 ||
         inet_pton(AF_INET6, host.c_str(), &buf) == 1;
}

// The reasons OpenSSL queued for the last failure, oldest first, and clears the queue.
std::string DrainOpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    std::string text = reason != nullptr ? reason : absl::StrCat("openssl error ", e);
    if (!absl::StrContains(out, text)) absl::StrAppend(&out, out.empty() ? "" : ": ", text);
  }
  return out;
}

// A write on a socket whose peer went away raises SIGPIPE, which kills a process that did not
// ignore it; OpenSSL's socket BIO writes with write(2), so MSG_NOSIGNAL cannot be used there.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL &&
      !(current.sa_flags & SA_SIGINFO)) {
    signal(SIGPIPE, SIG_IGN);
  }
}

int64_t PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
                           1 << 30);
}

// TCP_NODELAY (requests are written whole), keepalive and the user timeout (tls_connection.h).
absl::Status TuneSocket(int fd, const std::string& peer) {
  struct Option {
    int level;
    int name;
    int64_t value;
    const char* text;
  };
  const Option options[] = {
      {IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"},
      {SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
      {IPPROTO_TCP, TCP_KEEPIDLE, absl::ToInt64Seconds(kTcpKeepaliveIdle), "TCP_KEEPIDLE"},
      {IPPROTO_TCP, TCP_KEEPINTVL, absl::ToInt64Seconds(kTcpKeepaliveInterval), "TCP_KEEPINTVL"},
      {IPPROTO_TCP, TCP_KEEPCNT, kTcpKeepaliveCount, "TCP_KEEPCNT"},
      {IPPROTO_TCP, TCP_USER_TIMEOUT, absl::ToInt64Milliseconds(kTcpUserTimeout),
       "TCP_USER_TIMEOUT"},
  };
  for (const Option& o : options) {
    int value = static_cast<int>(o.value);
    if (::setsockopt(fd, o.level, o.name, &value, sizeof(value)) != 0) {
      return absl::UnavailableError(
          absl::StrCat("set ", o.text, " on the socket to ", peer, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Endpoint> ParseServerUrl(absl::string_view url) {
  Endpoint e;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "https://")) {
    e.tls = true;
    e.port = 443;
  } else if (absl::ConsumePrefix(&rest, "http://")) {
    e.tls = false;
    e.port = 80;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("server URL \"", url, "\" must start with https:// or http://"));
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    e.base_path = std::string(absl::StripSuffix(rest.substr(slash), "/"));
  }
  if (authority.empty() || absl::StrContains(authority, '@')) {
    return absl::InvalidArgumentError(
        absl::StrCat("server URL \"", url, "\" needs a host and must not carry user information"));
  }
  absl::string_view port;
  if (authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("server URL \"", url, "\": unclosed \"[\""));
    }
    e.host = std::string(authority.substr(1, close - 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) {
      return absl::InvalidArgumentError(
          absl::StrCat("server URL \"", url, "\": unexpected text after \"]\""));
    }
    port = after;
  } else {
    size_t colon = authority.find(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
  }
  if (e.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("server URL \"", url, "\" has an empty host"));
  }
  if (!port.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("server URL \"", url, "\": port \"", port, "\" is not 1-65535"));
    }
    e.port = p;
  }
  e.authority = absl::StrCat(
      absl::StrContains(e.host, ':') ? absl::StrCat("[", e.host, "]") : e.host, ":", e.port);
  return e;
}

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsOptions& options) {
  IgnoreSigpipeUnlessHandled();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(absl::StrCat("create TLS context: ", DrainOpenSslErrors()));
  }
  auto fail = [ctx](absl::string_view what) {
    std::string detail = DrainOpenSslErrors();
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(detail.empty() ? std::string(what)
                                                     : absl::StrCat(what, " (", detail, ")"));
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  static constexpr unsigned char kAlpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn) - 1);
  SSL_CTX_set_verify(ctx, options.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
                     nullptr);

  if (!options.ca_pem.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    BIO* bio = BIO_new_mem_buf(options.ca_pem.data(), static_cast<int>(options.ca_pem.size()));
    int added = 0;
    while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      if (X509_STORE_add_cert(store, cert) == 1) ++added;
      X509_free(cert);
    }
    BIO_free(bio);
    ERR_clear_error();  // the end of the PEM data is queued as an error
    if (added == 0) return fail("certificate authority data holds no PEM certificate");
  } else if (!options.insecure_skip_verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    return fail("load the system's trusted certificates");
  }

  if (!options.client_cert_pem.empty() || !options.client_key_pem.empty()) {
    BIO* bio = BIO_new_mem_buf(options.client_cert_pem.data(),
                               static_cast<int>(options.client_cert_pem.size()));
    X509* leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    while (ok) {  // intermediate certificates after the leaf
      X509* extra = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      if (extra == nullptr) break;
      if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) X509_free(extra);
    }
    BIO_free(bio);
    if (!ok) return fail("client certificate is not valid PEM");
    ERR_clear_error();
    bio = BIO_new_mem_buf(options.client_key_pem.data(),
                          static_cast<int>(options.client_key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    if (key == nullptr) return fail("client key is not a valid PEM private key");
    ok = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
    EVP_PKEY_free(key);
    if (!ok) {
      ERR_clear_error();
      return fail("client key does not match the client certificate");
    }
  }
  return std::shared_ptr<TlsContext>(new TlsContext(ctx, options));
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Connection::~Connection() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<bool> Connection::Wait(short events, absl::Time deadline) {
  for (;;) {
    pollfd p{fd_, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(PollTimeoutMs(deadline)));
    if (r > 0) return true;
    if (r == 0) {
      if (deadline != absl::InfiniteFuture() && absl::Now() >= deadline) return false;
      continue;  // woke a little early
    }
    if (errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("poll ", peer_, ": ", ErrnoText(errno)));
    }
  }
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const Endpoint& endpoint,
                                                             const TlsContext* tls,
                                                             absl::Time deadline) {
  std::string peer = endpoint.authority;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  std::string port = absl::StrCat(endpoint.port);
  if (int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &addrs); rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "resolve ", endpoint.host, ": ",
        rc == EAI_SYSTEM ? ErrnoText(errno) : absl::AsciiStrToLower(gai_strerror(rc))));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("connect to ", peer, ": no address"));
  std::unique_ptr<Connection> conn;
  for (addrinfo* a = addrs; a != nullptr && conn == nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = absl::UnavailableError(absl::StrCat("socket for ", peer, ": ", ErrnoText(errno)));
      continue;
    }
    auto c = std::unique_ptr<Connection>(new Connection(fd, peer));
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        auto ready = c->Wait(POLLOUT, deadline);
        if (!ready.ok()) {
          last = ready.status();
          continue;
        }
        if (!*ready) {
          last = absl::DeadlineExceededError(absl::StrCat("connect to ", peer, ": timed out"));
          continue;
        }
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0) {
      last = absl::UnavailableError(absl::StrCat("connect to ", peer, ": ", ErrnoText(err)));
      continue;
    }
    if (absl::Status tuned = TuneSocket(fd, peer); !tuned.ok()) {
      last = tuned;
      continue;
    }
    conn = std::move(c);
  }
  ::freeaddrinfo(addrs);
  if (conn == nullptr) return last;
  if (endpoint.tls) {
    if (tls == nullptr) return absl::InternalError("https endpoint without a TLS context");
    if (absl::Status s = conn->Handshake(*tls, endpoint, deadline); !s.ok()) return s;
  }
  return conn;
}

absl::Status Connection::TlsError(absl::string_view during, int ssl_error) {
  std::string detail = DrainOpenSslErrors();
  if (ssl_error == SSL_ERROR_SYSCALL && detail.empty()) {
    detail = errno != 0 ? ErrnoText(errno) : "connection closed by the server";
  }
  if (detail.empty()) detail = absl::StrCat("openssl error code ", ssl_error);
  return absl::UnavailableError(absl::StrCat(during, " ", peer_, ": ", detail));
}

absl::Status Connection::Handshake(const TlsContext& tls, const Endpoint& endpoint,
                                   absl::Time deadline) {
  ssl_ = SSL_new(tls.ctx());
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return TlsError("TLS setup for", 0);
  const std::string& name =
      tls.options().server_name.empty() ? endpoint.host : tls.options().server_name;
  bool ip = IsIpLiteral(name);
  if (!tls.options().insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                : X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    if (ok != 1) return TlsError(absl::StrCat("TLS name \"", name, "\" for"), 0);
  }
  if (!ip) SSL_set_tlsext_host_name(ssl_, name.c_str());  // SNI carries DNS names only
  ERR_clear_error();
  for (;;) {
    int r = SSL_connect(ssl_);
    if (r == 1) return absl::OkStatus();
    int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      auto ready = Wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
      if (!ready.ok()) return ready.status();
      if (!*ready) {
        return absl::DeadlineExceededError(
            absl::StrCat("TLS handshake with ", peer_, ": timed out"));
      }
      continue;
    }
    long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      ERR_clear_error();
      std::string reason = X509_verify_cert_error_string(verify);
      if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        absl::StrAppend(&reason, " (the certificate is not valid for \"", name, "\")");
      }
      return absl::UnavailableError(absl::StrCat("TLS handshake with ", peer_,
                                                 ": server certificate verify failed: ", reason));
    }
    return TlsError("TLS handshake with", err);
  }
}

absl::Status Connection::WriteAll(absl::string_view data, absl::Time deadline, bool* sent) {
  *sent = false;
  while (!data.empty()) {
    ssize_t n;
    short want = POLLOUT;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      errno = 0;
      n = SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
      if (n <= 0) {
        int err = SSL_get_error(ssl_, static_cast<int>(n));
        if (err == SSL_ERROR_WANT_READ) {
          want = POLLIN;
        } else if (err != SSL_ERROR_WANT_WRITE) {
          return AlertOr(TlsError("send to", err));
        }
      }
    } else {
      n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("send to ", peer_, ": ", ErrnoText(errno)));
      }
    }
    if (n > 0) {
      *sent = true;
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    auto ready = Wait(want, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return absl::DeadlineExceededError(absl::StrCat("send to ", peer_, ": timed out"));
  }
  return absl::OkStatus();
}

absl::Status Connection::AlertOr(absl::Status write_error) {
  // A TLS 1.3 server checks the client certificate after the client's handshake finished; a
  // rejection is an alert followed by a close, and the alert names the reason where the failed
  // write only says "broken pipe".
  char buf[512];
  size_t n = 0;
  auto r = Read(buf, sizeof(buf), absl::Now() + absl::Milliseconds(200), &n);
  if (!r.ok() && absl::StrContains(r.status().message(), "alert")) return r.status();
  return write_error;
}

absl::StatusOr<Connection::ReadResult> Connection::Read(char* buf, size_t size, absl::Time deadline,
                                                        size_t* n) {
  *n = 0;
  for (;;) {
    short want = POLLIN;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      errno = 0;
      int r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (r > 0) {
        *n = static_cast<size_t>(r);
        return ReadResult::kData;
      }
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_ZERO_RETURN) return ReadResult::kEof;
      if (err == SSL_ERROR_SYSCALL && errno == 0 && ERR_peek_error() == 0) return ReadResult::kEof;
      if (err == SSL_ERROR_WANT_WRITE) {
        want = POLLOUT;
      } else if (err != SSL_ERROR_WANT_READ) {
        return TlsError("read from", err);
      }
    } else {
      ssize_t r = ::recv(fd_, buf, size, 0);
      if (r > 0) {
        *n = static_cast<size_t>(r);
        return ReadResult::kData;
      }
      if (r == 0) return ReadResult::kEof;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("read from ", peer_, ": ", ErrnoText(errno)));
      }
    }
    auto ready = Wait(want, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return ReadResult::kTimeout;
  }
}

bool Connection::ClosedWhileIdle() {
  pollfd p{fd_, POLLIN, 0};
  int r = ::poll(&p, 1, 0);
  if (r == 0) return false;  // nothing arrived: still open as far as we can tell
  if (r < 0) return true;
  if (ssl_ != nullptr) {
    // TLS 1.3 servers send session tickets after the handshake; reading consumes them without
    // returning data. Anything else (application data, close_notify, EOF) ends the connection.
    char b;
    ERR_clear_error();
    int n = SSL_read(ssl_, &b, 1);
    if (n > 0) return true;
    int err = SSL_get_error(ssl_, n);
    ERR_clear_error();
    return err != SSL_ERROR_WANT_READ;
  }
  char b;
  ssize_t n = ::recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

}  // namespace dra::k8s
