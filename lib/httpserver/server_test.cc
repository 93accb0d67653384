// The server core over plain TCP, with the settings neither user combines (keep-alive and bodies
// without TLS) and with those of the metrics/health endpoints: the TLS layer and the webhook's
// limits are tested in lib/webhook/https_server*_test.cc, the endpoints in lib/metrics.

#include "lib/httpserver/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/httpserver/testing/slow_clients.h"
#include "lib/metrics/metrics.h"

namespace dra::httpserver {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Echoes the method, path and body.
HttpResponse Echo(const HttpRequest& r) {
  return HttpResponse{.body = absl::StrCat(r.method, " ", r.path, " ", r.body)};
}

int Connect(int port) {
  absl::StatusOr<int> fd =
      httpserver::testing::ConnectWithTimeout("127.0.0.1", port, std::chrono::seconds(5));
  EXPECT_TRUE(fd.ok()) << fd.status();
  if (!fd.ok()) return -1;
  timeval tv{5, 0};
  ::setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return *fd;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Reads one response whose body is `Content-Length` bytes long; empty on EOF or timeout first.
std::string ReadResponse(int fd) {
  std::string in;
  char buf[4096];
  while (true) {
    size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      size_t at = in.find("Content-Length: ");
      size_t length = at == std::string::npos ? 0 : std::stoul(in.substr(at + 16));
      if (in.size() >= end + 4 + length) return in.substr(0, end + 4 + length);
    }
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return "";
    in.append(buf, n);
  }
}

// True when the peer closes the connection (EOF) within the socket's read timeout.
bool ClosedByServer(int fd) {
  char c;
  return ::read(fd, &c, 1) == 0;
}

TEST(ServerTest, PlainKeepAliveServesRequestsWithBodiesOnOneConnection) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  auto server = Server::Start(options, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  int fd = Connect((*server)->port());
  ASSERT_GE(fd, 0);
  Send(fd, "POST /a?x=1 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  std::string first = ReadResponse(fd);
  EXPECT_THAT(first, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(first, Not(HasSubstr("Connection: close")));
  EXPECT_THAT(first, HasSubstr("\r\n\r\nPOST /a abc"));
  Send(fd, "GET /b HTTP/1.1\r\n\r\n");
  EXPECT_THAT(ReadResponse(fd), HasSubstr("\r\n\r\nGET /b "));
  EXPECT_EQ((*server)->connection_metrics().open(), 1);
  ::close(fd);
}

TEST(ServerTest, WithoutKeepAliveEveryResponseClosesItsConnection) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.keep_alive = false;
  auto server = Server::Start(options, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  int fd = Connect((*server)->port());
  ASSERT_GE(fd, 0);
  // Pipelined: the second request is never answered.
  Send(fd, "GET /a HTTP/1.1\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
  std::string response = ReadResponse(fd);
  EXPECT_THAT(response, HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(response, HasSubstr("\r\n\r\nGET /a "));
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
}

TEST(ServerTest, PlainRequestDeadlineRunsFromAcceptAndAPartialRequestGets408) {
  metrics::Registry registry;
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.request_timeout = absl::Milliseconds(300);
  options.registry = &registry;
  options.metrics_prefix = "test_http";
  auto server = Server::Start(options, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  int silent = Connect((*server)->port());
  int partial = Connect((*server)->port());
  ASSERT_GE(silent, 0);
  ASSERT_GE(partial, 0);
  Send(partial, "GET /a HTTP/1.1\r\n");
  EXPECT_THAT(ReadResponse(partial), StartsWith("HTTP/1.1 408 Request Timeout\r\n"));
  // Counted before the close: both closes seen, both counted.
  EXPECT_TRUE(ClosedByServer(partial));
  EXPECT_TRUE(ClosedByServer(silent));
  EXPECT_EQ((*server)->connection_metrics().timed_out(ConnectionPhase::kRequest), 2);
  EXPECT_EQ((*server)->connection_metrics().timed_out(ConnectionPhase::kHandshake), 0);
  EXPECT_THAT(registry.Render(),
              HasSubstr("test_http_connections_timed_out_total{phase=\"request\"} 2"));
  ::close(silent);
  ::close(partial);
}

TEST(ServerTest, NoBudgetMeansNoRefusalAndNoBudgetMetrics) {
  metrics::Registry registry;
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.registry = &registry;
  options.metrics_prefix = "test_http";
  auto server = Server::Start(options, [](const HttpRequest&) {
    return HttpResponse{.body = std::string(100000, 'x')};  // counted only under a budget
  });
  ASSERT_TRUE(server.ok()) << server.status();
  int fd = Connect((*server)->port());
  ASSERT_GE(fd, 0);
  Send(fd, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_THAT(ReadResponse(fd), StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ((*server)->request_budget().refused(), 0);
  EXPECT_THAT(registry.Render(), HasSubstr("test_http_connections_open"));
  EXPECT_THAT(registry.Render(), Not(HasSubstr("test_http_request_buffer")));
  ::close(fd);
}

TEST(ServerTest, BudgetBelowOneLargestRequestIsRefused) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.max_buffered_request_bytes = options.max_body_bytes;  // no room for the header
  auto server = Server::Start(options, Echo);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("below one largest request"));
}

}  // namespace
}  // namespace dra::httpserver
