#pragma once

// One connection of the server core (server.h), driven by an event loop over a non-blocking
// socket: the transport's handshake (TLS; none for plain TCP), then requests until the peer
// closes, an error, a deadline, a request without keep-alive (or a server without it), or Stop.
// Never blocks: each step that needs the socket says which readiness it waits for
// (wanted_events) and until when (deadline).
//
// Thread-safety: owned and used by one loop thread.

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "lib/httpserver/connection_metrics.h"
#include "lib/httpserver/request.h"
#include "lib/httpserver/request_budget.h"
#include "lib/httpserver/server.h"
#include "lib/httpserver/transport.h"

namespace dra::httpserver {

class Connection {
 public:
  using Clock = std::chrono::steady_clock;

  // What the connection needs from its server; all outlive it.
  struct Env {
    const ServerOptions* options;
    const HttpHandler* handler;
    const std::atomic<bool>* stopping;
    // Shared by the server's connections: the request buffer and the response being written
    // take their bytes from it (request_budget.h).
    RequestBudget* budget;
  };

  // Takes `fd` (non-blocking); `transport` works on it. The first deadline (the handshake's, or
  // the first request's without one) starts at `now`.
  Connection(int fd, std::unique_ptr<Transport> transport, Env env, Clock::time_point now);
  ~Connection();  // frees the transport, closes the socket
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Makes all the progress the socket allows. `scratch`: the loop's read buffer.
  void Advance(Clock::time_point now, std::string* scratch);
  // The deadline passed: answers 408 to a partly received request (best effort, one write
  // attempt) and is done. Returns the phase that ran out of time.
  ConnectionPhase Expire();
  // Stop began: done at once in the handshake or between requests.
  void OnStop();

  bool done() const { return state_ == State::kDone; }
  uint32_t wanted_events() const {
    if (transport_->peeking()) return EPOLLIN | EPOLLET;  // wake up for new bytes only
    return want_write_ ? EPOLLOUT : EPOLLIN;
  }
  Clock::time_point deadline() const { return deadline_; }
  int fd() const { return fd_; }

 private:
  enum class State { kHandshake, kIdle, kRequest, kWriting, kDone };
  // What follows a flushed write.
  enum class AfterWrite { kReadBody, kNextRequest, kClose };

  // Each returns false when the connection must wait for the socket (or is done).
  bool Handshake(Clock::time_point now, std::string* scratch);
  bool ReadRequest(Clock::time_point now, std::string* scratch);
  bool Write(Clock::time_point now);
  // Queues a response and switches to writing.
  void Respond(int code, absl::string_view content_type, absl::string_view body, bool close,
               bool head, Clock::time_point now);
  // Handles a transport result other than kOk: sets want_write_ and returns true to wait, or is
  // done.
  bool WaitOrFail(Transport::Io io);
  // Sizes buf_ to hold `bytes` without reallocating (exactly, or with room to grow when
  // `exact` is false), taking the growth from the budget. False when it does not fit: buf_ is
  // unchanged.
  bool ReserveRequest(size_t bytes, bool exact);
  // Frees buf_ and gives its bytes back.
  void FreeRequest();
  // Answers 503 and closes: the request's buffer does not fit in the budget.
  void RefuseOverBudget(Clock::time_point now);

  const int fd_;
  std::unique_ptr<Transport> transport_;
  const Env env_;
  State state_ = State::kHandshake;
  AfterWrite after_write_ = AfterWrite::kNextRequest;
  bool want_write_ = false;
  bool continue_sent_ = false;  // "100 Continue" for the request being read
  size_t request_size_ = 0;     // bytes of buf_ the answered request used
  Clock::time_point deadline_;
  std::string buf_;  // received, not yet answered
  std::string out_;  // response being written
  size_t written_ = 0;
  size_t buf_reserved_ = 0;  // budget bytes held for buf_ (its capacity)
  size_t out_reserved_ = 0;  // budget bytes held for out_
};

}  // namespace dra::httpserver
