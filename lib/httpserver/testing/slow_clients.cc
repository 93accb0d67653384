#include "lib/httpserver/testing/slow_clients.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::httpserver::testing {

absl::Status EnsureFileLimit(int needed) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return ErrnoToStatus(errno, "getrlimit");
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur >= static_cast<rlim_t>(needed)) {
    return absl::OkStatus();
  }
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < static_cast<rlim_t>(needed)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the hard RLIMIT_NOFILE is ", lim.rlim_max, ", this test needs ", needed,
                     " file descriptors (raise it with ulimit -Hn as root)"));
  }
  lim.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return ErrnoToStatus(errno, "setrlimit");
  return absl::OkStatus();
}

absl::StatusOr<int> ConnectWithTimeout(absl::string_view host, int port,
                                       std::chrono::milliseconds timeout) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string h(host);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(*v4);
  } else if (::inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(*v6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " is not an IP address"));
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) {
      absl::Status s = ErrnoToStatus(errno, absl::StrCat("connect to ", host, " port ", port));
      ::close(fd);
      return s;
    }
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    int err = 0;
    socklen_t err_len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (n <= 0 || err != 0) {
      ::close(fd);
      return n <= 0 ? absl::DeadlineExceededError(absl::StrCat("connect to ", host, " port ", port,
                                                               ": no answer in ", timeout.count(),
                                                               " ms"))
                    : ErrnoToStatus(err, absl::StrCat("connect to ", host, " port ", port));
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::chrono::milliseconds WaitForEof(int fd, std::chrono::milliseconds timeout) {
  auto start = SteadyClock::now();
  auto deadline = start + timeout;
  char buf[4096];
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) return std::chrono::milliseconds(-1);
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue;
    return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
  }
}

absl::StatusOr<std::unique_ptr<SlowClients>> SlowClients::Open(absl::string_view host, int port,
                                                               int silent, int drip,
                                                               std::string drip_data) {
  std::unique_ptr<SlowClients> clients(new SlowClients());
  clients->drip_data_ = std::move(drip_data);
  for (int i = 0; i < silent + drip; ++i) {
    absl::StatusOr<int> fd = ConnectWithTimeout(host, port, std::chrono::seconds(5));
    if (!fd.ok()) {
      return absl::Status(fd.status().code(),
                          absl::StrCat("slow connection ", i, ": ", fd.status().message()));
    }
    clients->conns_.push_back({*fd, i >= silent, SteadyClock::now()});
  }
  if (drip > 0) clients->drip_thread_ = std::thread([c = clients.get()] { c->Drip(); });
  return clients;
}

SlowClients::~SlowClients() {
  stop_.store(true);
  if (drip_thread_.joinable()) drip_thread_.join();
  for (const Conn& c : conns_) ::close(c.fd);
}

void SlowClients::Drip() {
  size_t next = 0;
  while (!stop_.load()) {
    for (const Conn& c : conns_) {
      if (c.drip) (void)::send(c.fd, &drip_data_[next], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    next = (next + 1) % drip_data_.size();
    for (int i = 0; i < 10 && !stop_.load(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

SlowClients::Closed SlowClients::WaitClosed(SteadyClock::time_point deadline) {
  Closed closed;
  std::vector<pollfd> fds;
  char buf[4096];
  while (true) {
    fds.clear();
    for (const Conn& c : conns_) {
      if (!c.closed) fds.push_back({c.fd, POLLIN, 0});
    }
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (fds.empty() || left.count() <= 0) return closed;
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()) + 1);
    if (n <= 0) continue;
    size_t j = 0;
    for (Conn& c : conns_) {
      if (c.closed) continue;
      const pollfd& p = fds[j++];
      if (p.revents == 0) continue;
      ssize_t r = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue;
      c.closed = true;
      (c.drip ? closed.drip : closed.silent)++;
      closed.latest = std::max(closed.latest, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  SteadyClock::now() - c.opened));
    }
  }
}

long RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

std::string Distribution(std::vector<std::chrono::microseconds> v) {
  std::sort(v.begin(), v.end());
  std::string s;
  char buf[32];
  for (std::chrono::microseconds d : v) {
    std::snprintf(buf, sizeof(buf), "%.1fms ", static_cast<double>(d.count()) / 1000.0);
    s += buf;
  }
  return s;
}

}  // namespace dra::httpserver::testing
