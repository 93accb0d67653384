#include "lib/httpserver/connection.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"

namespace dra::httpserver {
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
// The 503 body when a request or response does not fit in the budget.
std::string OverBudgetMessage(const ServerOptions& options, size_t limit) {
  return absl::StrCat("the ", options.budget_owner,
                      "'s buffers for requests and responses are full (at most ", limit,
                      " bytes across all connections, ", options.budget_setting, "); retry\n");
}

Connection::Clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<Connection::Clock::duration>(absl::ToChronoNanoseconds(d));
}

}  // namespace

Connection::Connection(int fd, std::unique_ptr<Transport> transport, Env env, Clock::time_point now)
    : fd_(fd), transport_(std::move(transport)), env_(env) {
  if (transport_->has_handshake()) {
    deadline_ = now + ToChrono(env.options->handshake_timeout);
  } else {
    state_ = State::kRequest;  // a new connection exists to send a request: no idle wait
    deadline_ = now + ToChrono(env.options->request_timeout);
  }
}

Connection::~Connection() {
  env_.budget->Release(buf_reserved_ + out_reserved_);
  transport_.reset();  // before the socket it works on closes
  ::close(fd_);
}

void Connection::Advance(Clock::time_point now, std::string* scratch) {
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

bool Connection::WaitOrFail(Transport::Io io) {
  if (io == Transport::Io::kWantRead || io == Transport::Io::kWantWrite) {
    want_write_ = io == Transport::Io::kWantWrite;
    return true;
  }
  state_ = State::kDone;  // the transport logged why
  return false;
}

bool Connection::Handshake(Clock::time_point now, std::string* scratch) {
  Transport::Io io = transport_->Handshake(scratch);
  if (io == Transport::Io::kOk) {
    want_write_ = false;
    state_ = State::kRequest;  // a new connection exists to send a request: no idle wait
    deadline_ = now + ToChrono(env_.options->request_timeout);
    return true;
  }
  WaitOrFail(io);
  return false;
}

bool Connection::ReadRequest(Clock::time_point now, std::string* scratch) {
  const ServerOptions& opt = *env_.options;
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
      bool close =
          !opt.keep_alive || !p.keep_alive || env_.stopping->load(std::memory_order_relaxed);
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
  size_t n = 0;
  Transport::Io io = transport_->Read(scratch->data(), read_size, &n);
  if (io == Transport::Io::kOk) {
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
  WaitOrFail(io);
  return false;
}

bool Connection::ReserveRequest(size_t bytes, bool exact) {
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

void Connection::FreeRequest() {
  buf_ = std::string();
  env_.budget->Release(buf_reserved_);
  buf_reserved_ = 0;
}

void Connection::RefuseOverBudget(Clock::time_point now) {
  FreeRequest();
  Respond(503, "text/plain; charset=utf-8", OverBudgetMessage(*env_.options, env_.budget->limit()),
          /*close=*/true, /*head=*/false, now);
}

void Connection::Respond(int code, absl::string_view content_type, absl::string_view body,
                         bool close, bool head, Clock::time_point now) {
  if (!head && body.size() > kUncountedResponseBytes) {
    if (env_.budget->TryAcquire(body.size())) {
      out_reserved_ = body.size();
    } else {
      Respond(503, "text/plain; charset=utf-8",
              OverBudgetMessage(*env_.options, env_.budget->limit()),
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

bool Connection::Write(Clock::time_point now) {
  while (written_ < out_.size()) {
    size_t n = 0;
    Transport::Io io = transport_->Write(out_.data() + written_, out_.size() - written_, &n);
    if (io != Transport::Io::kOk) {
      WaitOrFail(io);
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
      transport_->Shutdown();  // best effort: the socket closes next
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
    // the transport already holds bytes of a next request.
    if (env_.stopping->load(std::memory_order_relaxed)) {
      OnStop();
      return false;
    }
    return transport_->HasPending();
  } else {
    state_ = State::kRequest;  // pipelined: the next request has begun
    deadline_ = now + ToChrono(env_.options->request_timeout);
  }
  return true;
}

ConnectionPhase Connection::Expire() {
  ConnectionPhase phase = ConnectionPhase::kRequest;
  switch (state_) {
    case State::kHandshake:
      phase = ConnectionPhase::kHandshake;
      break;
    case State::kIdle:
      phase = ConnectionPhase::kIdle;
      break;
    case State::kWriting:
      phase = ConnectionPhase::kWrite;
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
    size_t n = 0;
    transport_->Write(reply.data(), reply.size(), &n);
  }
  state_ = State::kDone;
  return phase;
}

void Connection::OnStop() {
  bool idle = state_ == State::kHandshake || state_ == State::kIdle ||
              (state_ == State::kRequest && buf_.empty());
  if (!idle) return;  // a request in flight finishes; its response says Connection: close
  if (state_ != State::kHandshake) transport_->Shutdown();
  state_ = State::kDone;
}

}  // namespace dra::httpserver
