#include "lib/metrics/http_server.h"

#include <curl/curl.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::metrics {
namespace {

struct Got {
  long code = 0;
  std::string body;
};

Got Fetch(const std::string& url) {
  Got got;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(
      c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t s, size_t n, void* u) {
        static_cast<std::string*>(u)->append(d, s * n);
        return s * n;
      });
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &got.body);
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &got.code);
  curl_easy_cleanup(c);
  return got;
}

TEST(HttpServerTest, ServesHandlersAnd404) {
  bool ready = false;
  auto server = HttpServer::Start("127.0.0.1:0",
                                  {{"/metrics",
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

TEST(HttpServerTest, BadAddressesAreClearErrors) {
  EXPECT_THAT(std::string(HttpServer::Start("8080", {}).status().message()),
              ::testing::HasSubstr("expected host:port"));
  EXPECT_THAT(std::string(HttpServer::Start(":99999", {}).status().message()),
              ::testing::HasSubstr("port must be"));
  EXPECT_THAT(std::string(HttpServer::Start("example.com:80", {}).status().message()),
              ::testing::HasSubstr("IPv4"));
}

}  // namespace
}  // namespace dra::metrics
