#include "lib/httpserver/tls_transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>

#include "lib/common/log.h"

namespace dra::httpserver {
namespace {

// The first TLS record: content type handshake, and at most 2^14 bytes plus the expansion TLS
// allows (RFC 8446 5.2: a ClientHello is plaintext, so 2^14 suffices; 2048 more is lenient).
constexpr unsigned char kTlsHandshakeRecord = 0x16;
constexpr size_t kMaxTlsRecordBytes = (16 << 10) + 2048;

int ClampLen(size_t len) { return static_cast<int>(std::min<size_t>(len, INT_MAX)); }

}  // namespace

std::string TakeOpenSslErrors(const std::string& fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? fallback : out;
}

TlsTransport::TlsTransport(int fd, std::shared_ptr<SSL_CTX> ctx) : fd_(fd), ctx_(std::move(ctx)) {}

TlsTransport::~TlsTransport() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ERR_clear_error();
}

Transport::Io TlsTransport::Wait(int ret, const char* what) {
  int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
  // The peer closed or reset the connection, or spoke something other than TLS.
  DRA_VLOG(4, "https connection closed", "during", what, "err",
           TakeOpenSslErrors("connection closed"));
  return Io::kClosed;
}

bool TlsTransport::ClientHelloArrived(std::string* scratch, bool* closed) {
  unsigned char header[5];
  ssize_t n = ::recv(fd_, header, sizeof(header), MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (n <= 0) {  // closed or reset before a ClientHello
    *closed = true;
    return false;
  }
  if (n < static_cast<ssize_t>(sizeof(header))) return false;
  size_t length = (size_t{header[3]} << 8) | header[4];
  if (header[0] != kTlsHandshakeRecord || length > kMaxTlsRecordBytes) {
    DRA_VLOG(4, "https connection closed: not a TLS handshake", "firstByte", int{header[0]},
             "recordLength", length);
    *closed = true;
    return false;
  }
  scratch->resize(sizeof(header) + length);
  n = ::recv(fd_, scratch->data(), scratch->size(), MSG_PEEK);
  return n == static_cast<ssize_t>(scratch->size());
}

Transport::Io TlsTransport::Handshake(std::string* scratch) {
  if (ssl_ == nullptr) {
    bool closed = false;
    if (!ClientHelloArrived(scratch, &closed)) return closed ? Io::kClosed : Io::kWantRead;
    ssl_ = SSL_new(ctx_.get());  // holds its own reference to the context
    ctx_.reset();
    if (ssl_ == nullptr) {
      DRA_WARNING("https server: SSL_new failed", "err", TakeOpenSslErrors());
      return Io::kClosed;
    }
    // Partial writes and a moving buffer: a response is resent from where the last write stopped.
    // Released buffers: an idle connection does not keep 34 KiB of record buffers.
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                           SSL_MODE_RELEASE_BUFFERS);
    // One read(2) per request, not two per TLS record (its 5-byte header, then the rest): OpenSSL
    // reads what the socket holds into its buffer. Records left in that buffer are not seen by
    // epoll, so whoever stops reading before SSL_read says WANT_READ checks HasPending.
    SSL_set_read_ahead(ssl_, 1);
    SSL_set_fd(ssl_, fd_);
    SSL_set_accept_state(ssl_);
  }
  int r = SSL_do_handshake(ssl_);
  if (r == 1) return Io::kOk;
  return Wait(r, "handshake");
}

Transport::Io TlsTransport::Read(char* buf, size_t len, size_t* n) {
  int r = SSL_read(ssl_, buf, ClampLen(len));
  if (r > 0) {
    *n = static_cast<size_t>(r);
    return Io::kOk;
  }
  return Wait(r, "read");
}

Transport::Io TlsTransport::Write(const char* buf, size_t len, size_t* n) {
  int r = SSL_write(ssl_, buf, ClampLen(len));
  if (r > 0) {
    *n = static_cast<size_t>(r);
    return Io::kOk;
  }
  return Wait(r, "write");
}

bool TlsTransport::HasPending() const { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

void TlsTransport::Shutdown() {
  if (ssl_ == nullptr) return;
  SSL_shutdown(ssl_);  // close_notify, best effort: the socket closes next
  ERR_clear_error();
}

}  // namespace dra::httpserver
