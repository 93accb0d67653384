#include "lib/webhook/https_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <list>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::webhook {
namespace {

constexpr size_t kReadChunk = 16 << 10;

void SetTimeout(int fd, int option, absl::Duration d) {
  timeval tv = absl::ToTimeval(d);
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

// Parses the listen address into a bound socket address.
absl::Status ParseAddress(const std::string& address, sockaddr_storage* out, socklen_t* len) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", address, "\": expected host:port or :port"));
  }
  std::string host = address.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", address, "\": port must be 0..65535"));
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (host.empty()) {
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_any;
    v6->sin6_port = htons(port);
    *len = sizeof(*v6);
    return absl::OkStatus();
  }
  if (host == "localhost") host = "127.0.0.1";
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(*v4);
    return absl::OkStatus();
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof(*v6);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("listen address \"", address, "\": host must be an IP address or localhost"));
}

absl::StatusOr<int> Listen(const std::string& address, int* port) {
  sockaddr_storage addr;
  socklen_t len = 0;
  RETURN_IF_ERROR(ParseAddress(address, &addr, &len));
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 && addr.ss_family == AF_INET6 && errno == EAFNOSUPPORT) {
    // No IPv6 on this host: all IPv4 interfaces instead.
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
    in_port_t p = v6->sin6_port;
    std::memset(&addr, 0, sizeof(addr));
    auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
    v4->sin_family = AF_INET;
    v4->sin_port = p;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof(*v4);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("listen on ", address, ": socket"));
  int one = 1, zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr.ss_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 1024) != 0) {
    absl::Status s = ErrnoToStatus(errno, absl::StrCat("listen on ", address));
    ::close(fd);
    return s;
  }
  sockaddr_storage bound;
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  *port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

struct ConnThread {
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace

absl::string_view HttpReasonPhrase(int code) {
  switch (code) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

// The connection threads, owned by the server. Declared in the header as a friend.
struct ConnectionThreads {
  absl::Mutex mu;
  std::list<std::unique_ptr<ConnThread>> threads ABSL_GUARDED_BY(mu);

  // Joins the threads that have finished.
  void Reap() {
    std::list<std::unique_ptr<ConnThread>> finished;
    {
      absl::MutexLock lock(&mu);
      for (auto it = threads.begin(); it != threads.end();) {
        if ((*it)->done.load()) {
          finished.splice(finished.end(), threads, it++);
        } else {
          ++it;
        }
      }
    }
    for (auto& t : finished) t->thread.join();
  }
  void JoinAll() {
    std::list<std::unique_ptr<ConnThread>> all;
    {
      absl::MutexLock lock(&mu);
      all.swap(threads);
    }
    for (auto& t : all) t->thread.join();
  }
};

// One TLS connection: handshake, then requests until the peer closes, an error, a timeout, a
// non-keep-alive request, or Stop.
class Connection {
 public:
  Connection(HttpsServer* server, int fd, SSL* ssl) : server_(server), fd_(fd), ssl_(ssl) {}

  void Serve();

 private:
  enum class ReadResult { kOk, kClosed, kTimeout, kStopped };

  // Appends what arrives (at least one byte) to buf_. `idle`: between requests, where Stop ends
  // the wait.
  ReadResult ReadMore(absl::Time deadline, bool idle);
  bool Write(absl::string_view data);
  // `head`: a HEAD request, answered without the body.
  void Reply(int code, absl::string_view content_type, absl::string_view body, bool close,
             bool head = false);
  // Reads and answers one request; false when the connection is to be closed.
  bool ServeOne();

  HttpsServer* const server_;
  const int fd_;
  SSL* const ssl_;
  std::string buf_;
  std::string out_;
};

Connection::ReadResult Connection::ReadMore(absl::Time deadline, bool idle) {
  while (true) {
    if (SSL_pending(ssl_) == 0) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {server_->wake_fd_, POLLIN, 0}};
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return ReadResult::kTimeout;
      int ms = static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
      int n = ::poll(fds, idle ? 2 : 1, ms);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ReadResult::kClosed;
      }
      if (n == 0) return ReadResult::kTimeout;
      if (idle && (fds[1].revents & POLLIN) && !(fds[0].revents & POLLIN)) {
        return ReadResult::kStopped;
      }
    }
    size_t old = buf_.size();
    buf_.resize(old + kReadChunk);
    int n = SSL_read(ssl_, buf_.data() + old, static_cast<int>(kReadChunk));
    buf_.resize(old + (n > 0 ? n : 0));
    if (n > 0) return ReadResult::kOk;
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) continue;
    ERR_clear_error();
    return ReadResult::kClosed;
  }
}

bool Connection::Write(absl::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    int n = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
    if (n <= 0) {
      ERR_clear_error();
      return false;
    }
    off += n;
  }
  return true;
}

void Connection::Reply(int code, absl::string_view content_type, absl::string_view body, bool close,
                       bool head) {
  out_.clear();
  absl::StrAppend(&out_, "HTTP/1.1 ", code, " ", HttpReasonPhrase(code),
                  "\r\nContent-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                  close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n");
  if (!head) out_.append(body.data(), body.size());
  Write(out_);
}

bool Connection::ServeOne() {
  const HttpsServerOptions& opt = server_->options_;
  absl::Time deadline = absl::InfiniteFuture();
  size_t header_end;
  while ((header_end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (buf_.size() > opt.max_header_bytes) {
      Reply(431, "text/plain; charset=utf-8", "request header too large\n", true);
      return false;
    }
    bool idle = buf_.empty();
    if (!idle && deadline == absl::InfiniteFuture()) deadline = absl::Now() + opt.read_timeout;
    ReadResult r = ReadMore(idle ? absl::Now() + opt.idle_timeout : deadline, idle);
    if (r == ReadResult::kTimeout && !idle) {
      Reply(408, "text/plain; charset=utf-8", "request not received in time\n", true);
    }
    if (r != ReadResult::kOk) return false;
  }
  if (deadline == absl::InfiniteFuture()) deadline = absl::Now() + opt.read_timeout;
  absl::string_view head(buf_.data(), header_end);
  size_t line_end = head.find("\r\n");
  absl::string_view request_line = head.substr(0, line_end);
  absl::string_view headers =
      line_end == absl::string_view::npos ? absl::string_view() : head.substr(line_end + 2);

  std::vector<absl::string_view> parts = absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) {
    Reply(400, "text/plain; charset=utf-8", "malformed request line\n", true);
    return false;
  }
  absl::string_view method = parts[0], target = parts[1], version = parts[2];
  if (!absl::StartsWith(version, "HTTP/1.")) {
    Reply(505, "text/plain; charset=utf-8", "only HTTP/1.x is supported\n", true);
    return false;
  }
  bool keep_alive = version != "HTTP/1.0";
  bool has_length = false, expect_continue = false;
  uint64_t length = 0;
  absl::string_view content_type;
  for (absl::string_view line : absl::StrSplit(headers, "\r\n")) {
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      Reply(400, "text/plain; charset=utf-8", "malformed header line\n", true);
      return false;
    }
    absl::string_view name = line.substr(0, colon);
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "content-length")) {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(value, &v) || (has_length && v != length)) {
        Reply(400, "text/plain; charset=utf-8", "invalid Content-Length\n", true);
        return false;
      }
      has_length = true;
      length = v;
    } else if (absl::EqualsIgnoreCase(name, "content-type")) {
      content_type = value;
    } else if (absl::EqualsIgnoreCase(name, "connection")) {
      std::string lower = absl::AsciiStrToLower(value);
      if (absl::StrContains(lower, "close")) keep_alive = false;
      if (absl::StrContains(lower, "keep-alive")) keep_alive = true;
    } else if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
      Reply(501, "text/plain; charset=utf-8",
            "Transfer-Encoding is not supported; send Content-Length\n", true);
      return false;
    } else if (absl::EqualsIgnoreCase(name, "expect")) {
      expect_continue = absl::EqualsIgnoreCase(value, "100-continue");
    }
  }
  if (length > opt.max_body_bytes) {
    Reply(413, "text/plain; charset=utf-8",
          absl::StrCat("request body of ", length, " bytes exceeds the limit of ",
                       opt.max_body_bytes, " bytes\n"),
          true);
    return false;
  }
  size_t body_start = header_end + 4;
  size_t total = body_start + length;
  if (expect_continue && buf_.size() < total) Write("HTTP/1.1 100 Continue\r\n\r\n");
  while (buf_.size() < total) {
    ReadResult r = ReadMore(deadline, false);
    if (r == ReadResult::kTimeout) {
      Reply(408, "text/plain; charset=utf-8", "request body not received in time\n", true);
    }
    if (r != ReadResult::kOk) return false;
  }
  // Views into buf_ stay valid until the erase below.
  HttpRequest req;
  req.method = method;
  req.path = target.substr(0, target.find('?'));
  req.content_type = content_type;
  req.body = absl::string_view(buf_.data() + body_start, length);
  if (!has_length && method == "POST") {
    Reply(411, "text/plain; charset=utf-8", "Content-Length is required\n", true);
    return false;
  }
  HttpResponse resp = server_->handler_(req);
  bool close = !keep_alive || server_->Stopping();
  Reply(resp.code, resp.content_type, resp.body, close, method == "HEAD");
  buf_.erase(0, total);
  return !close;
}

void Connection::Serve() {
  SSL_set_fd(ssl_, fd_);
  if (SSL_accept(ssl_) != 1) {
    DRA_VLOG(4, "TLS handshake failed", "err", TakeOpenSslErrors("connection closed"));
    return;
  }
  buf_.reserve(2 * kReadChunk);
  while (ServeOne()) {
  }
  SSL_shutdown(ssl_);
  ERR_clear_error();
}

absl::StatusOr<std::unique_ptr<HttpsServer>> HttpsServer::Start(HttpsServerOptions options,
                                                                ServingCertificate* certs,
                                                                HttpsHandler handler) {
  // OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a peer that closed first would kill the
  // process with SIGPIPE (e.g. our close_notify after the client's). EPIPE is handled instead.
  std::signal(SIGPIPE, SIG_IGN);
  int port = 0;
  ASSIGN_OR_RETURN(int listen_fd, Listen(options.address, &port));
  int wake_fd = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd < 0) {
    ::close(listen_fd);
    return ErrnoToStatus(errno, "eventfd");
  }
  std::unique_ptr<HttpsServer> server(
      new HttpsServer(std::move(options), certs, std::move(handler), listen_fd, wake_fd, port));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

HttpsServer::HttpsServer(HttpsServerOptions options, ServingCertificate* certs,
                         HttpsHandler handler, int listen_fd, int wake_fd, int port)
    : options_(std::move(options)),
      certs_(certs),
      handler_(std::move(handler)),
      listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      port_(port),
      threads_(std::make_unique<ConnectionThreads>()) {}

HttpsServer::~HttpsServer() {
  Stop();
  ::close(wake_fd_);
}

void HttpsServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      DRA_ERROR("https server: poll failed", "err", ErrnoToStatus(errno, "poll"));
      return;
    }
    if (fds[1].revents & POLLIN) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        DRA_WARNING("https server: accept failed", "err", ErrnoToStatus(errno, "accept"));
        ::usleep(10000);
      }
      continue;
    }
    threads_->Reap();
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    SetTimeout(fd, SO_RCVTIMEO, options_.read_timeout);
    SetTimeout(fd, SO_SNDTIMEO, options_.write_timeout);
    {
      absl::MutexLock lock(&mu_);
      if (static_cast<int>(connections_.size()) >= options_.max_connections) {
        DRA_WARNING("https server: too many connections, closing a new one", "max",
                    options_.max_connections);
        ::close(fd);
        continue;
      }
      connections_.insert(fd);
    }
    std::shared_ptr<SSL_CTX> ctx = certs_->Current();
    auto entry = std::make_unique<ConnThread>();
    ConnThread* raw = entry.get();
    {
      absl::MutexLock lock(&threads_->mu);
      threads_->threads.push_back(std::move(entry));
    }
    raw->thread = std::thread([this, fd, ctx = std::move(ctx), raw]() mutable {
      ServeConnection(fd, std::move(ctx));
      raw->done.store(true);
    });
  }
}

void HttpsServer::ServeConnection(int fd, std::shared_ptr<SSL_CTX> ctx) {
  SSL* ssl = SSL_new(ctx.get());  // holds its own reference to the context
  ctx.reset();
  if (ssl == nullptr) {
    DRA_WARNING("https server: SSL_new failed", "err", TakeOpenSslErrors());
  } else {
    Connection(this, fd, ssl).Serve();
    SSL_free(ssl);
  }
  {
    absl::MutexLock lock(&mu_);
    connections_.erase(fd);
  }
  ::close(fd);
}

void HttpsServer::Stop() {
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
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));  // stays readable: wakes everyone
  if (accept_thread_.joinable()) accept_thread_.join();
  ::close(listen_fd_);
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(this, &HttpsServer::Drained),
                              options_.shutdown_grace)) {
      DRA_WARNING("https server: requests still running after the grace period; closing them",
                  "connections", connections_.size());
      for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
    }
  }
  threads_->JoinAll();
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

}  // namespace dra::webhook
