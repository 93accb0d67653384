#include "lib/metrics/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::metrics {
namespace {

constexpr int kReadTimeoutMs = 5000;
constexpr size_t kMaxRequestBytes = 16 * 1024;

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += n;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& address, std::map<std::string, HttpHandler> handlers) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("http endpoint \"", address, "\": expected host:port or :port"));
  }
  std::string host = address.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("http endpoint \"", address, "\": port must be 0..65535"));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (host.empty() || host == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (host == "localhost") {
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("http endpoint \"", address, "\": host must be an IPv4 address"));
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "http endpoint: socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    absl::Status s = ErrnoToStatus(errno, absl::StrCat("http endpoint: listen on ", address));
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto server =
      std::unique_ptr<HttpServer>(new HttpServer(fd, ntohs(addr.sin_port), std::move(handlers)));
  server->thread_ = std::thread([raw = server.get()] { raw->Serve(); });
  return server;
}

HttpServer::HttpServer(int fd, int port, std::map<std::string, HttpHandler> handlers)
    : fd_(fd), port_(port), handlers_(std::move(handlers)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  fd_ = -1;
}

void HttpServer::Serve() {
  while (true) {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // listener shut down
    }
    HandleConnection(c);
    ::close(c);
  }
}

void HttpServer::HandleConnection(int fd) {
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kReadTimeoutMs) <= 0) return;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return;
    request.append(buf, n);
  }
  std::string line = request.substr(0, request.find("\r\n"));
  auto sp1 = line.find(' ');
  auto sp2 = line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) return;
  std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  HttpResponse response;
  auto it = handlers_.find(path);
  if (it == handlers_.end()) {
    response = {404, "text/plain; charset=utf-8", "404 page not found\n"};
  } else if (method != "GET" && method != "HEAD") {
    response = {405, "text/plain; charset=utf-8", "method not allowed\n"};
  } else {
    response = it->second();
  }
  std::string out =
      absl::StrCat("HTTP/1.1 ", response.code, " ", Reason(response.code),
                   "\r\nContent-Type: ", response.content_type,
                   "\r\nContent-Length: ", response.body.size(), "\r\nConnection: close\r\n\r\n");
  if (method != "HEAD") out += response.body;
  WriteAll(fd, out);
  DRA_VLOG(6, "served http request", "method", method, "path", path, "code", response.code);
}

}  // namespace dra::metrics
