#include "lib/httpserver/endpoint_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/httpserver/metrics_endpoint.h"

namespace dra::httpserver {
namespace {

struct Got {
  long code = 0;
  std::string body;
};

// One GET over a fresh loopback connection; the server answers with Connection: close, so the
// body is everything after the header. code 0: no answer or no status line.
Got Fetch(const std::string& url) {
  Got got;
  // url: "http://127.0.0.1:<port><path>"
  const std::string rest = url.substr(std::string("http://127.0.0.1:").size());
  const size_t slash = rest.find('/');
  const int port = std::atoi(rest.substr(0, slash).c_str());
  const std::string path = rest.substr(slash);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) response.append(buf, n);
    }
  }
  ::close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 ", 0) == 0 && header_end != std::string::npos) {
    got.code = std::atol(response.c_str() + 9);
    got.body = response.substr(header_end + 4);
  }
  return got;
}

TEST(EndpointServerTest, ServesHandlersAnd404) {
  bool ready = false;
  auto server = EndpointServer::Start(
      "127.0.0.1:0", {{"/metrics",
                       [] {
                         return HttpResponse{200, "text/plain", "m 1\n"};
                       }},
                      {"/readyz", [&ready] {
                         return ready ? HttpResponse{200, "text/plain", "ok"}
                                      : HttpResponse{503, "text/plain", "not ready"};
                       }}});
  ASSERT_TRUE(server.ok()) << server.status();
  std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  Got m = Fetch(base + "/metrics");
  EXPECT_EQ(m.code, 200);
  EXPECT_EQ(m.body, "m 1\n");
  EXPECT_EQ(Fetch(base + "/readyz").code, 503);
  ready = true;
  EXPECT_EQ(Fetch(base + "/readyz?verbose").code, 200);
  EXPECT_EQ(Fetch(base + "/nope").code, 404);
  (*server)->Stop();
  EXPECT_EQ(Fetch(base + "/metrics").code, 0);  // connection refused after Stop
}

TEST(MetricsEndpointTest, ServesHealthzAndTheRegistryAtThePathGiven) {
  metrics::Registry registry;
  registry.AddCounter("test_things_total", "Things.", {})->WithLabels({})->Inc(3);
  auto server = StartMetricsEndpoint("127.0.0.1:0", "custom", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE(*server, nullptr);
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  Got healthz = Fetch(base + "/healthz");
  EXPECT_EQ(healthz.code, 200);
  EXPECT_EQ(healthz.body, "ok");
  Got metrics = Fetch(base + "/custom");
  EXPECT_EQ(metrics.code, 200);
  EXPECT_THAT(metrics.body, ::testing::HasSubstr("test_things_total 3"));
  // The server's connection metrics are in the same registry.
  EXPECT_THAT(metrics.body, ::testing::HasSubstr("nvidia_dra_http_endpoint_"));
  EXPECT_EQ(Fetch(base + "/metrics").code, 404);
}

TEST(MetricsEndpointTest, EmptyPathServesOnlyHealthzAndEmptyEndpointNothing) {
  metrics::Registry registry;
  auto server = StartMetricsEndpoint("127.0.0.1:0", "", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  EXPECT_EQ(Fetch(base + "/healthz").code, 200);
  EXPECT_EQ(Fetch(base + "/metrics").code, 404);
  auto none = StartMetricsEndpoint("", "/metrics", &registry);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
  auto bad = StartMetricsEndpoint("8080", "/metrics", &registry);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("--http-endpoint"));
}

TEST(EndpointServerTest, BadAddressesAreClearErrors) {
  EXPECT_THAT(std::string(EndpointServer::Start("8080", {}).status().message()),
              ::testing::HasSubstr("expected host:port"));
  EXPECT_THAT(std::string(EndpointServer::Start(":99999", {}).status().message()),
              ::testing::HasSubstr("port must be"));
  EXPECT_THAT(std::string(EndpointServer::Start("example.com:80", {}).status().message()),
              ::testing::HasSubstr("IPv4"));
}

}  // namespace
}  // namespace dra::httpserver
