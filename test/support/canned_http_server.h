#pragma once

// A tiny loopback HTTP/1.1 server for unit tests of our HTTP client's own behaviour (retries,
// Retry-After, rate limiting, error mapping): it answers each request with the next canned
// response and records what it received. It models no Kubernetes semantics; integration tests use
// the real kube-apiserver for that.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace dra::testing {

class CannedHttpServer {
 public:
  struct Reply {
    int code;
    std::string body;
    std::string extra_headers;  // e.g. "Retry-After: 1\r\n"
  };

  explicit CannedHttpServer(std::vector<Reply> replies) : replies_(std::move(replies)) { Listen(); }
  // Answers each request with route(request line), e.g. by path, for clients that send requests
  // to several URLs in no fixed order.
  explicit CannedHttpServer(std::function<Reply(const std::string& request_line)> route)
      : route_(std::move(route)) {
    Listen();
  }
  ~CannedHttpServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Whole request heads (request line and headers), in arrival order.
  std::vector<std::string> heads() {
    absl::MutexLock l(&mu_);
    return heads_;
  }

  // Request lines ("GET /path HTTP/1.1") with the time each arrived.
  std::vector<std::pair<std::string, absl::Time>> requests() {
    absl::MutexLock l(&mu_);
    return requests_;
  }

 private:
  void Listen() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    (void)::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));  // port 0 on loopback
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }

  void Serve() {
    size_t next = 0;
    while (true) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      // One request per connection (we answer with Connection: close).
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, n);
      }
      {
        absl::MutexLock l(&mu_);
        requests_.emplace_back(in.substr(0, in.find("\r\n")), absl::Now());
        heads_.push_back(in.substr(0, in.find("\r\n\r\n")));
      }
      const Reply r = route_ ? route_(in.substr(0, in.find("\r\n")))
                             : replies_[std::min(next++, replies_.size() - 1)];
      std::string out = "HTTP/1.1 " + std::to_string(r.code) +
                        " X\r\nContent-Type: " + "application/json\r\nConnection: close\r\n" +
                        r.extra_headers + "Content-Length: " + std::to_string(r.body.size()) +
                        "\r\n\r\n" + r.body;
      ssize_t ignored = ::write(c, out.data(), out.size());
      (void)ignored;
      ::close(c);
    }
  }

  std::vector<Reply> replies_;
  std::function<Reply(const std::string&)> route_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::pair<std::string, absl::Time>> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> heads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra::testing
