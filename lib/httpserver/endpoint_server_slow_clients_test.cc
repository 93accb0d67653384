// Slow clients must not stall the metrics/healthz server: 1000 connections that send nothing or
// drip a request one byte per second are open while /healthz is fetched, and the server closes
// each of them when its deadline passes.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/httpserver/endpoint_server.h"
#include "lib/httpserver/testing/slow_clients.h"

namespace dra::httpserver {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using testing::Distribution;
using ::testing::HasSubstr;
using testing::RssKib;
using testing::SteadyClock;

constexpr int kSilent = 500;
constexpr int kDrip = 500;

struct Timed {
  int code = 0;
  microseconds took{0};
};

// One GET on a fresh connection, from connect to the end of the response (Connection: close).
Timed TimedGet(const std::string& host, int port, const std::string& path) {
  Timed t;
  auto start = SteadyClock::now();
  absl::StatusOr<int> fd = testing::ConnectWithTimeout(host, port, std::chrono::seconds(5));
  if (!fd.ok()) return t;
  timeval tv{5, 0};
  ::setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string response;
  if (::send(*fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::read(*fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
  }
  ::close(*fd);
  t.took = std::chrono::duration_cast<microseconds>(SteadyClock::now() - start);
  if (response.rfind("HTTP/1.1 ", 0) == 0) t.code = std::atoi(response.c_str() + 9);
  return t;
}

TEST(EndpointServerSlowClientsTest, HealthzAnswersWhileAThousandSlowConnectionsAreOpen) {
  if (absl::Status s = testing::EnsureFileLimit(2 * (kSilent + kDrip) + 200); !s.ok()) {
    GTEST_SKIP() << s.message();
  }
  auto server =
      EndpointServer::Start("127.0.0.1:0", {{"/healthz", [] {
                                               return HttpResponse{200, "text/plain", "ok"};
                                             }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  TimedGet("127.0.0.1", port, "/healthz");
  const long rss_before = RssKib();
  auto opened = SteadyClock::now();
  auto slow = testing::SlowClients::Open("127.0.0.1", port, kSilent, kDrip,
                                         "GET /healthz HTTP/1.1\r\nHost: x\r\n");
  ASSERT_TRUE(slow.ok()) << slow.status();
  std::fprintf(stderr, "opened %d slow connections in %lld ms\n", kSilent + kDrip,
               static_cast<long long>(
                   std::chrono::duration_cast<milliseconds>(SteadyClock::now() - opened).count()));

  // While they are open: /healthz on fresh connections, one after another.
  std::vector<microseconds> took;
  took.reserve(15);
  for (int i = 0; i < 15; ++i) {
    Timed t = TimedGet("127.0.0.1", port, "/healthz");
    EXPECT_EQ(t.code, 200) << "request " << i;
    took.push_back(t.took);
  }
  std::vector<microseconds> sorted = took;
  std::sort(sorted.begin(), sorted.end());
  std::fprintf(stderr, "/healthz with %d slow connections open: %s\n", kSilent + kDrip,
               Distribution(took).c_str());
  // The median, not every request: the 2-core test machine may deschedule the server.
  EXPECT_LE(sorted[sorted.size() / 2], milliseconds(100)) << Distribution(took);
  EXPECT_LE(sorted.back(), milliseconds(2000)) << Distribution(took);
  // They were all still open: the deadline had not passed.
  EXPECT_GE((*server)->connection_metrics().open(), kSilent + kDrip);
  std::fprintf(stderr, "test process RSS: %ld KiB before the slow connections, %ld KiB with them\n",
               rss_before, RssKib());

  // Every slow connection is closed by the server once its deadline passed (EOF on the
  // client); dripping does not extend it.
  testing::SlowClients::Closed closed =
      (*slow)->WaitClosed(SteadyClock::now() + std::chrono::seconds(20));
  EXPECT_EQ(closed.silent, kSilent);
  EXPECT_EQ(closed.drip, kDrip);
  std::fprintf(stderr, "last slow connection closed %lld ms after it was opened\n",
               static_cast<long long>(closed.latest.count()));
  EXPECT_GE(closed.latest, absl::ToChronoMilliseconds(kEndpointRequestTimeout) - milliseconds(100));
  EXPECT_EQ((*server)->connection_metrics().timed_out(ConnectionPhase::kRequest), kSilent + kDrip);
  EXPECT_EQ((*server)->connection_metrics().open(), 0);
}

TEST(EndpointServerSlowClientsTest, DeadlinesAndTheConnectionLimitAreMetrics) {
  metrics::Registry registry;
  EndpointServerOptions options;
  options.address = "127.0.0.1:0";
  options.request_timeout = absl::Milliseconds(300);
  options.max_connections = 3;
  options.registry = &registry;
  auto server =
      EndpointServer::Start(options, {{"/metrics", [&registry] {
                                         return HttpResponse{200, "text/plain", registry.Render()};
                                       }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto slow = testing::SlowClients::Open("127.0.0.1", port, 3, 0, "");
  ASSERT_TRUE(slow.ok()) << slow.status();
  // At the limit: a new connection is accepted and closed at once, without an answer.
  absl::StatusOr<int> extra = testing::ConnectWithTimeout("127.0.0.1", port, milliseconds(5000));
  ASSERT_TRUE(extra.ok()) << extra.status();
  milliseconds eof = testing::WaitForEof(*extra, milliseconds(5000));
  ::close(*extra);
  EXPECT_GE(eof.count(), 0) << "the connection over the limit was not closed";
  EXPECT_LT(eof, milliseconds(250)) << "closed by its deadline, not at accept";
  // The silent ones are closed when their deadline passes, and then the server answers again.
  testing::SlowClients::Closed closed =
      (*slow)->WaitClosed(SteadyClock::now() + std::chrono::seconds(10));
  EXPECT_EQ(closed.silent, 3);
  Timed t;
  for (int i = 0; i < 50 && t.code != 200; ++i) {  // the server may not have counted the closes yet
    t = TimedGet("127.0.0.1", port, "/metrics");
  }
  ASSERT_EQ(t.code, 200);
  std::string rendered = registry.Render();
  EXPECT_THAT(rendered, HasSubstr("nvidia_dra_http_endpoint_connections_rejected_total 1\n"));
  EXPECT_THAT(
      rendered,
      HasSubstr("nvidia_dra_http_endpoint_connections_timed_out_total{phase=\"request\"} 3\n"));
  EXPECT_THAT(rendered, HasSubstr("nvidia_dra_http_endpoint_connections_open 0\n"));
}

// ":port" listens on IPv6 and IPv4; "[::1]:port" on IPv6 loopback only.
TEST(EndpointServerTest, ListensOnIpv6) {
  auto handlers =
      std::map<std::string, EndpointHandler>{{"/healthz", [] {
                                                return HttpResponse{200, "text/plain", "ok"};
                                              }}};
  auto all = EndpointServer::Start(":0", handlers);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(TimedGet("::1", (*all)->port(), "/healthz").code, 200);
  EXPECT_EQ(TimedGet("127.0.0.1", (*all)->port(), "/healthz").code, 200);
  auto v6 = EndpointServer::Start("[::1]:0", handlers);
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(TimedGet("::1", (*v6)->port(), "/healthz").code, 200);
  EXPECT_EQ(TimedGet("127.0.0.1", (*v6)->port(), "/healthz").code, 0);
  auto any6 = EndpointServer::Start("[::]:0", handlers);
  ASSERT_TRUE(any6.ok()) << any6.status();
  EXPECT_EQ(TimedGet("127.0.0.1", (*any6)->port(), "/healthz").code, 200);
  EXPECT_THAT(std::string(EndpointServer::Start("[::1:0", handlers).status().message()),
              HasSubstr("IPv6"));
}

}  // namespace
}  // namespace dra::httpserver
