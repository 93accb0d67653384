#include "lib/metrics/http_server.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/metrics/listen.h"

namespace dra::metrics {
namespace {

constexpr size_t kMaxRequestBytes = size_t{16} << 10;
// Accepts per wake-up, so that a burst of new connections does not starve the others.
constexpr int kAcceptBatch = 64;
// How long accepting pauses when the process is out of file descriptors (accept would fail
// again at once, and the listener stays readable).
constexpr std::chrono::milliseconds kAcceptPause(100);

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

}  // namespace

struct HttpServer::Conn {
  int fd;
  std::string in;
  std::string out;
  size_t written = 0;
  bool writing = false;
  Clock::time_point deadline;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& address, std::map<std::string, HttpHandler> handlers) {
  HttpServerOptions options;
  options.address = address;
  return Start(std::move(options), std::move(handlers));
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options, std::map<std::string, HttpHandler> handlers) {
  absl::StatusOr<Listener> listener = Listen(options.address);
  if (!listener.ok()) return Annotate(listener.status(), "http endpoint");
  int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || wake_fd < 0) {
    absl::Status s = ErrnoToStatus(errno, "http endpoint: epoll/eventfd");
    ::close(listener->fd);
    if (epoll_fd >= 0) ::close(epoll_fd);
    if (wake_fd >= 0) ::close(wake_fd);
    return s;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener->fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener->fd, &ev);
  ev.data.fd = wake_fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  std::unique_ptr<HttpServer> server(new HttpServer(
      std::move(options), std::move(handlers), listener->fd, listener->port, epoll_fd, wake_fd));
  server->thread_ = std::thread([raw = server.get()] { raw->Loop(); });
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, std::map<std::string, HttpHandler> handlers,
                       int listen_fd, int port, int epoll_fd, int wake_fd)
    : options_(std::move(options)),
      handlers_(std::move(handlers)),
      metrics_(options_.registry, options_.metrics_prefix),
      listen_fd_(listen_fd),
      port_(port),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd) {}

HttpServer::~HttpServer() {
  Stop();
  ::close(epoll_fd_);
  ::close(wake_fd_);
}

void HttpServer::Stop() {
  if (listen_fd_ < 0) return;
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::Loop() {
  epoll_event events[64];
  while (true) {
    int timeout_ms = -1;
    Clock::time_point now = Clock::now();
    if (!deadlines_.empty()) {
      auto left = deadlines_.begin()->first - now;
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(left).count(), 0, INT32_MAX));
    }
    if (!accepting_) {
      int left = static_cast<int>(std::clamp<int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(accept_resume_ - now).count(), 0,
          INT32_MAX));
      timeout_ms = timeout_ms < 0 ? left : std::min(timeout_ms, left);
    }
    int n = ::epoll_wait(epoll_fd_, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      DRA_ERROR("http endpoint: epoll_wait failed", "err", ErrnoToStatus(errno, "epoll_wait"));
      break;
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        for (auto& [cfd, c] : conns_) {
          ::close(cfd);
          metrics_.Closed();
        }
        conns_.clear();
        deadlines_.clear();
        return;
      }
      if (fd == listen_fd_) {
        Accept();
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end()) continue;  // closed earlier in this batch
      if (it->second->writing) {
        OnWritable(it->second.get());
      } else {
        OnReadable(it->second.get());
      }
    }
    now = Clock::now();
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      Conn* c = conns_.at(deadlines_.begin()->second).get();
      metrics_.TimedOut(c->writing ? ConnectionPhase::kWrite : ConnectionPhase::kRequest);
      DRA_VLOG(5, "http endpoint: closing a connection past its deadline", "writing", c->writing);
      Close(c);
    }
    if (!accepting_ && now >= accept_resume_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
      accepting_ = true;
    }
  }
}

void HttpServer::Accept() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        DRA_WARNING("http endpoint: accept failed; pausing accepts", "err",
                    ErrnoToStatus(errno, "accept"), "pauseMs", kAcceptPause.count());
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accepting_ = false;
        accept_resume_ = Clock::now() + kAcceptPause;
      }
      return;  // EAGAIN: none left; others (ECONNABORTED...): the next wake-up retries
    }
    if (static_cast<int>(conns_.size()) >= options_.max_connections) {
      metrics_.Rejected();
      DRA_VLOG(2, "http endpoint: connection limit reached, closing a new connection", "max",
               options_.max_connections);
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    Conn* raw = c.get();
    conns_.emplace(fd, std::move(c));
    metrics_.Opened();
    SetDeadline(raw, Clock::now() + absl::ToChronoNanoseconds(options_.request_timeout));
  }
}

void HttpServer::OnReadable(Conn* c) {
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // the client went away before its request was complete
      Close(c);
      return;
    }
    c->in.append(buf, n);
    if (c->in.find("\r\n\r\n") != std::string::npos || c->in.size() >= kMaxRequestBytes) {
      Answer(c);
      return;
    }
  }
}

void HttpServer::Answer(Conn* c) {
  HttpResponse response;
  std::string method, path;
  size_t header_end = c->in.find("\r\n\r\n");
  std::string line = c->in.substr(0, c->in.find("\r\n"));
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (header_end == std::string::npos) {
    response = {431, "text/plain; charset=utf-8",
                absl::StrCat("request header exceeds ", kMaxRequestBytes, " bytes\n")};
  } else if (sp2 == std::string::npos) {
    response = {400, "text/plain; charset=utf-8", "malformed request line\n"};
  } else {
    method = line.substr(0, sp1);
    path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    auto it = handlers_.find(path);
    if (it == handlers_.end()) {
      response = {404, "text/plain; charset=utf-8", "404 page not found\n"};
    } else if (method != "GET" && method != "HEAD") {
      response = {405, "text/plain; charset=utf-8", "method not allowed\n"};
    } else {
      response = it->second();
    }
  }
  c->in = std::string();  // frees the request
  c->out =
      absl::StrCat("HTTP/1.1 ", response.code, " ", Reason(response.code),
                   "\r\nContent-Type: ", response.content_type,
                   "\r\nContent-Length: ", response.body.size(), "\r\nConnection: close\r\n\r\n");
  if (method != "HEAD") c->out += response.body;
  DRA_VLOG(6, "served http request", "method", method, "path", path, "code", response.code);
  c->writing = true;
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.fd = c->fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
  SetDeadline(c, Clock::now() + absl::ToChronoNanoseconds(options_.write_timeout));
  OnWritable(c);
}

void HttpServer::OnWritable(Conn* c) {
  while (c->written < c->out.size()) {
    ssize_t n = ::send(c->fd, c->out.data() + c->written, c->out.size() - c->written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) break;  // the client went away
    c->written += n;
  }
  Close(c);
}

void HttpServer::SetDeadline(Conn* c, Clock::time_point deadline) {
  deadlines_.erase({c->deadline, c->fd});
  c->deadline = deadline;
  deadlines_.insert({deadline, c->fd});
}

void HttpServer::Close(Conn* c) {
  int fd = c->fd;
  deadlines_.erase({c->deadline, fd});
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  metrics_.Closed();  // before the client can see the close
  ::close(fd);
  conns_.erase(fd);  // destroys c
}

}  // namespace dra::metrics
