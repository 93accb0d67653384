#include "lib/webhook/https_connection.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/webhook/https_request.h"

namespace dra::webhook {
namespace {

constexpr size_t kReadChunk = 16 << 10;
// Request buffers larger than this are freed between requests instead of kept for the next one
// (kept ones stay counted in the budget).
constexpr size_t kKeptBufferBytes = 16 << 10;
// The same for the response buffer, which is not counted: a few hundred bytes is the usual answer.
constexpr size_t kKeptResponseBytes = 2 << 10;
// Responses up to this size take nothing from the budget (an answer to a review is a few hundred
// bytes); they cost at most this per connection. Larger ones (a denial listing thousands of
// configs) are held until the client takes them, so they count.
constexpr size_t kUncountedResponseBytes = 1 << 10;
// The first TLS record: content type handshake, and at most 2^14 bytes plus the expansion TLS
// allows (RFC 8446 5.2: a ClientHello is plaintext, so 2^14 suffices; 2048 more is lenient).
constexpr unsigned char kTlsHandshakeRecord = 0x16;
constexpr size_t kMaxTlsRecordBytes = (16 << 10) + 2048;

// The 503 body when a request or response does not fit in the budget.
std::string OverBudgetMessage(size_t limit) {
  return absl::StrCat("the webhook's buffers for requests and responses are full (at most ", limit,
                      " bytes across all connections, --max-buffered-request-bytes); retry\n");
}

HttpsConnection::Clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<HttpsConnection::Clock::duration>(absl::ToChronoNanoseconds(d));
}

}  // namespace

HttpsConnection::HttpsConnection(int fd, std::shared_ptr<SSL_CTX> ctx, Env env,
                                 Clock::time_point now)
    : fd_(fd),
      ctx_(std::move(ctx)),
      env_(env),
      deadline_(now + ToChrono(env.options->handshake_timeout)) {}

HttpsConnection::~HttpsConnection() {
  env_.budget->Release(buf_reserved_ + out_reserved_);
  if (ssl_ != nullptr) SSL_free(ssl_);
  ::close(fd_);
  ERR_clear_error();
}

void HttpsConnection::Advance(Clock::time_point now, std::string* scratch) {
  while (true) {
    bool progressed = false;
    switch (state_) {
      case State::kHandshake:
        progressed = Handshake(now, scratch);
        break;
      case State::kIdle:
      case State::kRequest:
        progressed = ReadRequest(now, scratch);
        break;
      case State::kWriting:
        progressed = Write(now);
        break;
      case State::kDone:
        return;
    }
    if (!progressed) return;
  }
}

bool HttpsConnection::WaitOrFail(int ret, const char* what) {
  int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    want_write_ = err == SSL_ERROR_WANT_WRITE;
    return true;
  }
  // The peer closed or reset the connection, or spoke something other than TLS.
  DRA_VLOG(4, "https connection closed", "during", what, "err",
           TakeOpenSslErrors("connection closed"));
  state_ = State::kDone;
  return false;
}

bool HttpsConnection::ClientHelloArrived(std::string* scratch) {
  unsigned char header[5];
  ssize_t n = ::recv(fd_, header, sizeof(header), MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
  if (n <= 0) {  // closed or reset before a ClientHello
    state_ = State::kDone;
    return false;
  }
  if (n < static_cast<ssize_t>(sizeof(header))) return false;
  size_t length = (size_t{header[3]} << 8) | header[4];
  if (header[0] != kTlsHandshakeRecord || length > kMaxTlsRecordBytes) {
    DRA_VLOG(4, "https connection closed: not a TLS handshake", "firstByte", int{header[0]},
             "recordLength", length);
    state_ = State::kDone;
    return false;
  }
  scratch->resize(sizeof(header) + length);
  n = ::recv(fd_, scratch->data(), scratch->size(), MSG_PEEK);
  return n == static_cast<ssize_t>(scratch->size());
}

bool HttpsConnection::Handshake(Clock::time_point now, std::string* scratch) {
  if (ssl_ == nullptr) {
    if (!ClientHelloArrived(scratch)) return false;
    ssl_ = SSL_new(ctx_.get());  // holds its own reference to the context
    ctx_.reset();
    if (ssl_ == nullptr) {
      DRA_WARNING("https server: SSL_new failed", "err", TakeOpenSslErrors());
      state_ = State::kDone;
      return false;
    }
    // Partial writes and a moving buffer: out_ is resent from where the last write stopped.
    // Released buffers: an idle connection does not keep 34 KiB of record buffers.
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                           SSL_MODE_RELEASE_BUFFERS);
    // One read(2) per request, not two per TLS record (its 5-byte header, then the rest): OpenSSL
    // reads what the socket holds into its buffer. Records left in that buffer are not seen by
    // epoll, so whoever stops reading before SSL_read says WANT_READ checks SSL_has_pending.
    SSL_set_read_ahead(ssl_, 1);
    SSL_set_fd(ssl_, fd_);
    SSL_set_accept_state(ssl_);
  }
  int r = SSL_do_handshake(ssl_);
  if (r == 1) {
    want_write_ = false;
    state_ = State::kRequest;  // a new connection exists to send a request: no idle wait
    deadline_ = now + ToChrono(env_.options->request_timeout);
    return true;
  }
  WaitOrFail(r, "handshake");
  return false;
}

bool HttpsConnection::ReadRequest(Clock::time_point now, std::string* scratch) {
  const HttpsServerOptions& opt = *env_.options;
  ParsedRequest p = ParseHttpRequest(buf_, opt.max_header_bytes, opt.max_body_bytes);
  size_t read_size = kReadChunk;
  switch (p.state) {
    case ParsedRequest::State::kError:
      Respond(p.error_code, "text/plain; charset=utf-8", p.error_body, /*close=*/true,
              /*head=*/false, now);
      return true;
    case ParsedRequest::State::kComplete: {
      HttpResponse resp = (*env_.handler)(p.request);
      request_size_ = p.size;
      bool close = !p.keep_alive || env_.stopping->load(std::memory_order_relaxed);
      Respond(resp.code, resp.content_type, resp.body, close, p.request.method == "HEAD", now);
      return true;
    }
    case ParsedRequest::State::kNeedBody:
      // The whole request's buffer comes from the budget before its body is read (and before
      // 100 Continue invites it); reads then stop at the request's end, so it never grows.
      if (!ReserveRequest(p.size, /*exact=*/true)) {
        RefuseOverBudget(now);
        return true;
      }
      read_size = std::min(kReadChunk, p.size - buf_.size());
      if (p.expect_continue && !continue_sent_) {
        continue_sent_ = true;
        out_ = "HTTP/1.1 100 Continue\r\n\r\n";
        written_ = 0;
        after_write_ = AfterWrite::kReadBody;
        state_ = State::kWriting;  // the request's deadline still runs
        return true;
      }
      break;
    case ParsedRequest::State::kIncomplete:
      break;
  }
  if (buf_.empty() && env_.stopping->load(std::memory_order_relaxed)) {
    OnStop();
    return false;
  }
  scratch->resize(kReadChunk);
  int n = SSL_read(ssl_, scratch->data(), static_cast<int>(read_size));
  if (n > 0) {
    if (!ReserveRequest(buf_.size() + n, /*exact=*/false)) {
      RefuseOverBudget(now);
      return true;
    }
    want_write_ = false;
    if (state_ == State::kIdle) {
      state_ = State::kRequest;
      deadline_ = now + ToChrono(opt.request_timeout);
    }
    buf_.append(scratch->data(), n);
    return true;
  }
  WaitOrFail(n, "read");
  return false;
}

bool HttpsConnection::ReserveRequest(size_t bytes, bool exact) {
  if (bytes <= buf_reserved_) return true;
  // While the request's size is unknown (its header), the buffer doubles.
  size_t target = exact || buf_reserved_ == 0 ? bytes : std::max(bytes, 2 * buf_reserved_);
  if (!env_.budget->TryAcquire(target - buf_reserved_)) return false;
  // A new string of exactly `target`: reserve() on the old one may round up to twice its size.
  std::string grown;
  grown.reserve(target);
  grown.append(buf_);
  buf_.swap(grown);
  buf_reserved_ = target;
  return true;
}

void HttpsConnection::FreeRequest() {
  buf_ = std::string();
  env_.budget->Release(buf_reserved_);
  buf_reserved_ = 0;
}

void HttpsConnection::RefuseOverBudget(Clock::time_point now) {
  FreeRequest();
  Respond(503, "text/plain; charset=utf-8", OverBudgetMessage(env_.budget->limit()),
          /*close=*/true, /*head=*/false, now);
}

void HttpsConnection::Respond(int code, absl::string_view content_type, absl::string_view body,
                              bool close, bool head, Clock::time_point now) {
  if (!head && body.size() > kUncountedResponseBytes) {
    if (env_.budget->TryAcquire(body.size())) {
      out_reserved_ = body.size();
    } else {
      Respond(503, "text/plain; charset=utf-8", OverBudgetMessage(env_.budget->limit()),
              /*close=*/true, /*head=*/false, now);
      return;
    }
  }
  out_.clear();
  absl::StrAppend(&out_, "HTTP/1.1 ", code, " ", HttpReasonPhrase(code),
                  "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                  close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n");
  if (!head) out_.append(body.data(), body.size());
  written_ = 0;
  after_write_ = close ? AfterWrite::kClose : AfterWrite::kNextRequest;
  state_ = State::kWriting;
  deadline_ = now + ToChrono(env_.options->write_timeout);
}

bool HttpsConnection::Write(Clock::time_point now) {
  while (written_ < out_.size()) {
    int len = static_cast<int>(std::min<size_t>(out_.size() - written_, INT_MAX));
    int n = SSL_write(ssl_, out_.data() + written_, len);
    if (n <= 0) {
      WaitOrFail(n, "write");
      return false;
    }
    written_ += n;
  }
  want_write_ = false;
  written_ = 0;
  out_.clear();
  if (out_.capacity() > kKeptResponseBytes) out_ = std::string();
  env_.budget->Release(out_reserved_);
  out_reserved_ = 0;
  switch (after_write_) {
    case AfterWrite::kReadBody:
      state_ = State::kRequest;
      return true;
    case AfterWrite::kClose:
      SSL_shutdown(ssl_);  // close_notify, best effort: the socket closes next
      ERR_clear_error();
      state_ = State::kDone;
      return false;
    case AfterWrite::kNextRequest:
      break;
  }
  buf_.erase(0, request_size_);
  request_size_ = 0;
  continue_sent_ = false;
  if (buf_.empty()) {
    if (buf_reserved_ > kKeptBufferBytes) FreeRequest();
    state_ = State::kIdle;
    deadline_ = now + ToChrono(env_.options->idle_timeout);
    // The client waits for this response before it sends the next request (the API server does
    // not pipeline): wait for the socket instead of a read(2) that would find nothing, unless
    // OpenSSL already holds bytes of a next request.
    if (env_.stopping->load(std::memory_order_relaxed)) {
      OnStop();
      return false;
    }
    return SSL_has_pending(ssl_) == 1;
  } else {
    state_ = State::kRequest;  // pipelined: the next request has begun
    deadline_ = now + ToChrono(env_.options->request_timeout);
  }
  return true;
}

metrics::ConnectionPhase HttpsConnection::Expire() {
  metrics::ConnectionPhase phase = metrics::ConnectionPhase::kRequest;
  switch (state_) {
    case State::kHandshake:
      phase = metrics::ConnectionPhase::kHandshake;
      break;
    case State::kIdle:
      phase = metrics::ConnectionPhase::kIdle;
      break;
    case State::kWriting:
      phase = metrics::ConnectionPhase::kWrite;
      break;
    case State::kRequest:
    case State::kDone:
      break;
  }
  if (state_ == State::kRequest && !buf_.empty()) {
    // One non-blocking attempt: the client is slow, and is not waited for.
    constexpr absl::string_view kBody = "request not received in time\n";
    std::string reply = absl::StrCat("HTTP/1.1 408 ", HttpReasonPhrase(408),
                                     "\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                     "Content-Length: ",
                                     kBody.size(), "\r\nConnection: close\r\n\r\n", kBody);
    SSL_write(ssl_, reply.data(), static_cast<int>(reply.size()));
    ERR_clear_error();
  }
  state_ = State::kDone;
  return phase;
}

void HttpsConnection::OnStop() {
  bool idle = state_ == State::kHandshake || state_ == State::kIdle ||
              (state_ == State::kRequest && buf_.empty());
  if (!idle) return;  // a request in flight finishes; its response says Connection: close
  if (state_ != State::kHandshake) {
    SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  state_ = State::kDone;
}

}  // namespace dra::webhook
