#include "lib/httpserver/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <limits>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/httpserver/connection.h"
#include "lib/httpserver/listen.h"
#include "lib/httpserver/tls_transport.h"
#include "lib/httpserver/transport.h"

namespace dra::httpserver {
namespace {

using Clock = std::chrono::steady_clock;

// Accepts per wake-up, so that a burst of new connections does not starve the others.
constexpr int kAcceptBatch = 64;
// How long a loop stops accepting when the process is out of file descriptors (accept would
// fail again at once, and the listener stays readable).
constexpr std::chrono::milliseconds kAcceptPause(100);
// At most one warning per loop this often about connections closed at the limit.
constexpr std::chrono::seconds kRejectWarningInterval(60);

int TimeoutMs(Clock::time_point now, Clock::time_point until) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT32_MAX));
}

}  // namespace

// One epoll loop thread. Every loop waits on the shared listener (EPOLLEXCLUSIVE: the kernel
// wakes one idle loop per new connection). The loop that accepts a connection gives it to the
// loop with the fewest connections (itself when tied): the kernel wakes the same idle loop
// first every time, so without this one loop would get every connection of a burst.
//
// Thread-safety: Run on its own thread; Wake, Give, load and WaitExited from any thread.
class EventLoop {
 public:
  EventLoop(Server* server, int epoll_fd, int wake_fd)
      : server_(server), epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}
  ~EventLoop() {
    ::close(epoll_fd_);
    ::close(wake_fd_);
  }

  void Start() {
    thread_ = std::thread([this] { Run(); });
    // Named for top -H, perf and bench/webhook (which sums the webhook's loops' CPU time).
    pthread_setname_np(thread_.native_handle(), server_->options_.thread_name.c_str());
  }
  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  // Connections this loop owns or has been given.
  int load() const { return load_.load(std::memory_order_relaxed); }
  // Hands an accepted socket to this loop (counted in load() by the caller).
  void Give(int fd) ABSL_LOCKS_EXCLUDED(inbox_mu_) {
    {
      absl::MutexLock lock(&inbox_mu_);
      inbox_.push_back(fd);
    }
    Wake();
  }
  // Sockets given after the loop exited; REQUIRES: the loop thread has been joined.
  std::vector<int> TakeInbox() ABSL_LOCKS_EXCLUDED(inbox_mu_) {
    absl::MutexLock lock(&inbox_mu_);
    return std::move(inbox_);
  }
  bool WaitExited(absl::Duration timeout) {
    return !thread_.joinable() || exited_.WaitForNotificationWithTimeout(timeout);
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Entry {
    std::unique_ptr<Connection> conn;
    uint32_t events = 0;
    Clock::time_point deadline;
  };

  void Run();
  void BeginStop();
  void Accept(Clock::time_point now);
  void AddConnection(int fd, Clock::time_point now);
  void TakeGiven(Clock::time_point now) ABSL_LOCKS_EXCLUDED(inbox_mu_);
  // After a connection advanced: closes it when done, else updates its events and deadline.
  void Update(int fd, Entry& e);
  void Close(int fd);

  Server* const server_;
  const int epoll_fd_;
  const int wake_fd_;  // eventfd
  std::thread thread_;
  absl::Notification exited_;
  std::atomic<int> load_{0};
  absl::Mutex inbox_mu_;
  std::vector<int> inbox_ ABSL_GUARDED_BY(inbox_mu_);

  // Owned by the loop thread.
  std::unordered_map<int, Entry> conns_;  // by socket
  std::set<std::pair<Clock::time_point, int>> deadlines_;
  bool stopping_ = false;
  bool accepting_ = true;
  Clock::time_point accept_resume_;
  Clock::time_point next_reject_warning_;
  std::string scratch_;  // read buffer shared by the loop's connections
};

void EventLoop::Run() {
  epoll_event events[64];
  while (true) {
    if (!stopping_ && server_->Stopping()) BeginStop();
    if (stopping_ && (conns_.empty() || server_->force_close_.load())) break;
    Clock::time_point now = Clock::now();
    int timeout_ms = deadlines_.empty() ? -1 : TimeoutMs(now, deadlines_.begin()->first);
    if (!accepting_ && !stopping_) {
      int resume = TimeoutMs(now, accept_resume_);
      timeout_ms = timeout_ms < 0 ? resume : std::min(timeout_ms, resume);
    }
    int n = ::epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      DRA_ERROR(absl::StrCat(server_->options_.log_name, ": epoll_wait failed"), "err",
                ErrnoToStatus(errno, "epoll_wait"));
      break;
    }
    now = Clock::now();
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t v;
        (void)!::read(wake_fd_, &v, sizeof(v));
        TakeGiven(now);
        continue;  // the top of the loop looks at the server's state
      }
      if (fd == server_->listen_fd_) {
        if (!stopping_ && !server_->Stopping()) Accept(now);
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;
      it->second.conn->Advance(now, &scratch_);
      Update(fd, it->second);
    }
    now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      int fd = deadlines_.begin()->second;
      ConnectionPhase phase = conns_.at(fd).conn->Expire();
      server_->metrics_.TimedOut(phase);
      DRA_VLOG(4,
               absl::StrCat(server_->options_.log_name, ": closing a connection past its deadline"),
               "phase", static_cast<int>(phase));
      Close(fd);
    }
    if (!accepting_ && !stopping_ && now >= accept_resume_) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLEXCLUSIVE;
      ev.data.fd = server_->listen_fd_;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, server_->listen_fd_, &ev);
      accepting_ = true;
    }
  }
  std::vector<int> fds;
  for (const auto& [fd, e] : conns_) fds.push_back(fd);
  for (int fd : fds) Close(fd);
  exited_.Notify();
}

void EventLoop::BeginStop() {
  stopping_ = true;
  if (accepting_) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, server_->listen_fd_, nullptr);
  std::vector<int> fds;
  for (const auto& [fd, e] : conns_) fds.push_back(fd);
  for (int fd : fds) {
    Entry& e = conns_.at(fd);
    e.conn->OnStop();
    Update(fd, e);
  }
}

void EventLoop::Accept(Clock::time_point now) {
  const ServerOptions& opt = server_->options_;
  for (int i = 0; i < kAcceptBatch; ++i) {
    int fd = ::accept4(server_->listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        DRA_WARNING(absl::StrCat(opt.log_name, ": accept failed; pausing accepts"), "err",
                    ErrnoToStatus(errno, "accept"), "pauseMs", kAcceptPause.count());
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, server_->listen_fd_, nullptr);
        accepting_ = false;
        accept_resume_ = now + kAcceptPause;
      }
      return;  // EAGAIN: none left (or another loop took it); others: retried at the next wake
    }
    if (server_->open_.fetch_add(1) >= opt.max_connections) {
      server_->open_.fetch_sub(1);
      server_->metrics_.Rejected();
      if (now >= next_reject_warning_) {
        DRA_WARNING(
            absl::StrCat(opt.log_name, ": connection limit reached; closing new connections"),
            "max", opt.max_connections);
        next_reject_warning_ = now + kRejectWarningInterval;
      }
      ::close(fd);
      continue;
    }
    server_->metrics_.Opened();
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    EventLoop* target = this;
    for (const auto& loop : server_->loops_) {
      if (loop->load() < target->load()) target = loop.get();
    }
    target->load_.fetch_add(1);
    if (target == this) {
      AddConnection(fd, now);
    } else {
      target->Give(fd);
    }
  }
}

void EventLoop::TakeGiven(Clock::time_point now) {
  std::vector<int> given;
  {
    absl::MutexLock lock(&inbox_mu_);
    given.swap(inbox_);
  }
  for (int fd : given) {
    AddConnection(fd, now);
    if (stopping_) {
      Entry& e = conns_.at(fd);
      e.conn->OnStop();
      Update(fd, e);
    }
  }
}

void EventLoop::AddConnection(int fd, Clock::time_point now) {
  Connection::Env env{&server_->options_, &server_->handler_, &server_->stopping_flag_,
                      &server_->budget_};
  Entry& e = conns_[fd];
  std::unique_ptr<Transport> transport;
  if (server_->options_.tls_context) {
    transport = std::make_unique<TlsTransport>(fd, server_->options_.tls_context());
  } else {
    transport = std::make_unique<PlainTransport>(fd);
  }
  e.conn = std::make_unique<Connection>(fd, std::move(transport), env, now);
  e.events = e.conn->wanted_events();
  e.deadline = e.conn->deadline();
  deadlines_.insert({e.deadline, fd});
  epoll_event ev{};
  ev.events = e.events;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void EventLoop::Update(int fd, Entry& e) {
  if (e.conn->done()) {
    Close(fd);
    return;
  }
  if (e.conn->wanted_events() != e.events) {
    e.events = e.conn->wanted_events();
    epoll_event ev{};
    ev.events = e.events;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  }
  if (e.conn->deadline() != e.deadline) {
    deadlines_.erase({e.deadline, fd});
    e.deadline = e.conn->deadline();
    deadlines_.insert({e.deadline, fd});
  }
}

void EventLoop::Close(int fd) {
  auto it = conns_.find(fd);
  deadlines_.erase({it->second.deadline, fd});
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  server_->metrics_.Closed();  // before the client can see the close
  server_->open_.fetch_sub(1);
  load_.fetch_sub(1);
  conns_.erase(it);  // closes the socket
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options, HttpHandler handler) {
  if (options.tls_context) {
    // OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a peer that closed first would kill
    // the process with SIGPIPE (e.g. our close_notify after the client's). EPIPE is handled
    // instead.
    std::signal(SIGPIPE, SIG_IGN);
  }
  if (options.max_buffered_request_bytes != 0 &&
      options.max_buffered_request_bytes < options.max_header_bytes + options.max_body_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request buffer budget of ", options.max_buffered_request_bytes,
        " bytes is below one largest request (", options.max_header_bytes, " bytes of header + ",
        options.max_body_bytes, " bytes of body), which could never be read"));
  }
  ASSIGN_OR_RETURN(Listener listener, Listen(options.address));
  int loops = options.loop_threads;
  if (loops <= 0) loops = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 2, 4);
  std::unique_ptr<Server> server(
      new Server(std::move(options), std::move(handler), listener.fd, listener.port));
  for (int i = 0; i < loops; ++i) {
    int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd < 0 || wake_fd < 0) {
      absl::Status s =
          ErrnoToStatus(errno, absl::StrCat(server->options_.log_name, ": epoll/eventfd"));
      if (epoll_fd >= 0) ::close(epoll_fd);
      if (wake_fd >= 0) ::close(wake_fd);
      return s;  // the server's destructor stops the loops started so far
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.fd = listener.fd;
    ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener.fd, &ev);
    server->loops_.push_back(std::make_unique<EventLoop>(server.get(), epoll_fd, wake_fd));
    server->loops_.back()->Start();
  }
  return server;
}

Server::Server(ServerOptions options, HttpHandler handler, int listen_fd, int port)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      listen_fd_(listen_fd),
      port_(port),
      metrics_(options_.registry, options_.metrics_prefix),
      // Without a budget: one that never refuses, and no metrics of it.
      budget_(options_.max_buffered_request_bytes != 0 ? options_.max_buffered_request_bytes
                                                       : std::numeric_limits<size_t>::max(),
              options_.max_buffered_request_bytes != 0 ? options_.registry : nullptr,
              options_.metrics_prefix) {}

Server::~Server() { Stop(); }

void Server::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      // A second caller waits for the first to finish.
      mu_.Await(absl::Condition(&stopped_));
      return;
    }
    stopping_ = true;
    stopping_flag_.store(true);
  }
  // New connections are refused from now on, even while a loop is busy in a handler.
  ::shutdown(listen_fd_, SHUT_RDWR);
  for (auto& loop : loops_) loop->Wake();
  absl::Time grace_end = absl::Now() + options_.shutdown_grace;
  bool drained = true;
  for (auto& loop : loops_) drained = loop->WaitExited(grace_end - absl::Now()) && drained;
  if (!drained) {
    // Without a grace period (the metrics/health endpoints) a response being written is simply cut.
    if (options_.shutdown_grace > absl::ZeroDuration()) {
      DRA_WARNING(absl::StrCat(options_.log_name,
                               ": requests still running after the grace period; closing them"),
                  "grace", absl::FormatDuration(options_.shutdown_grace));
    }
    force_close_.store(true);
    for (auto& loop : loops_) loop->Wake();
  }
  for (auto& loop : loops_) loop->Join();
  // Sockets given to a loop after it had exited (accepted just as Stop began).
  for (auto& loop : loops_) {
    for (int fd : loop->TakeInbox()) {
      metrics_.Closed();
      open_.fetch_sub(1);
      ::close(fd);
    }
  }
  ::close(listen_fd_);
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

}  // namespace dra::httpserver
