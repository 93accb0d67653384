// The client's own HTTP behaviour (retries, Retry-After, rate limit), against a canned loopback
// server. Kubernetes semantics are covered by the integration tests on the real API server.

#include "lib/k8s/client.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_core.h"
#include "test/support/canned_http_server.h"

namespace dra::k8s {
namespace {

using dra::testing::CannedHttpServer;

constexpr char kTooMany[] =
    R"({"kind":"Status","status":"Failure","message":"too many requests","reason":"TooManyRequests","code":429})";
constexpr char kNode[] = R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}})";

std::unique_ptr<Client> ClientFor(const CannedHttpServer& server, ClientOptions options = {}) {
  RestConfig cfg;
  cfg.server = server.url();
  auto c = Client::Create(cfg, std::move(options));
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TEST(ClientRetryTest, HonoursRetryAfterOn429ThenSucceeds) {
  CannedHttpServer server({{429, kTooMany, "Retry-After: 1\r\n"}, {200, kNode, ""}});
  auto client = ClientFor(server);
  auto node = client->Get(Node::kResource, "", "n1");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)["metadata"]["name"], "n1");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].first, "GET /api/v1/nodes/n1 HTTP/1.1");
  EXPECT_GE(reqs[1].second - reqs[0].second, absl::Milliseconds(900));
}

TEST(ClientRetryTest, GivesUpAfterMaxRetriesWithTheReason) {
  CannedHttpServer server({{429, kTooMany, "Retry-After: 0\r\n"}});
  auto client = ClientFor(server, {.max_retries = 2});
  auto node = client->Get(Node::kResource, "", "n1");
  EXPECT_TRUE(IsTooManyRequests(node.status())) << node.status();
  EXPECT_EQ(server.requests().size(), 3u);
}

constexpr char kInternal[] =
    R"({"kind":"Status","status":"Failure","message":"etcdserver: leader changed","reason":"InternalError","code":500})";
constexpr char kUnavailable[] =
    R"({"kind":"Status","status":"Failure","message":"starting","reason":"ServiceUnavailable","code":503})";

// Gaps between consecutive requests the server saw.
std::vector<absl::Duration> Gaps(CannedHttpServer& server) {
  std::vector<absl::Duration> gaps;
  auto reqs = server.requests();
  for (size_t i = 1; i < reqs.size(); ++i) gaps.push_back(reqs[i].second - reqs[i - 1].second);
  return gaps;
}

// An API server answering 500 for a while (etcd leader change, restarting aggregated API): reads
// are retried with exponentially growing gaps and the call succeeds once the server recovers.
TEST(ClientRetryTest, RetriesServerErrorsOnReadsWithGrowingBackoffThenRecovers) {
  CannedHttpServer server(
      {{500, kInternal, ""}, {500, kInternal, ""}, {500, kInternal, ""}, {200, kNode, ""}});
  auto client = ClientFor(server, {.retry_backoff = {.initial = absl::Milliseconds(50),
                                                     .max = absl::Seconds(1),
                                                     .factor = 2.0,
                                                     .jitter = 0}});
  auto node = client->Get(Node::kResource, "", "n1");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)["metadata"]["name"], "n1");
  std::vector<absl::Duration> gaps = Gaps(server);
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_GE(gaps[0], absl::Milliseconds(50));
  EXPECT_GE(gaps[1], absl::Milliseconds(100));
  EXPECT_GE(gaps[2], absl::Milliseconds(200));
}

// 429s with Retry-After, then 503s, then success: every Retry-After is waited out in full, and the
// call recovers without the caller seeing an error.
TEST(ClientRetryTest, RidesOutAnOverloadWindowHonouringRetryAfter) {
  CannedHttpServer server({{429, kTooMany, "Retry-After: 1\r\n"},
                           {429, kTooMany, "Retry-After: 1\r\n"},
                           {503, kUnavailable, "Retry-After: 1\r\n"},
                           {200, kNode, ""}});
  auto client = ClientFor(server);
  auto created = client->Create(Node::kResource, "", nlohmann::json::parse(kNode));
  ASSERT_TRUE(created.ok()) << created.status();
  std::vector<absl::Duration> gaps = Gaps(server);
  ASSERT_EQ(gaps.size(), 3u);
  for (absl::Duration gap : gaps) EXPECT_GE(gap, absl::Milliseconds(950));
  for (const auto& [line, at] : server.requests()) EXPECT_EQ(line, "POST /api/v1/nodes HTTP/1.1");
}

// A Retry-After shorter than the backoff does not shorten it: a server that keeps answering
// "Retry-After: 0" still sees growing gaps.
TEST(ClientRetryTest, BackoffGrowsEvenWhenRetryAfterIsZero) {
  CannedHttpServer server({{429, kTooMany, "Retry-After: 0\r\n"},
                           {429, kTooMany, "Retry-After: 0\r\n"},
                           {429, kTooMany, "Retry-After: 0\r\n"},
                           {200, kNode, ""}});
  auto client = ClientFor(server, {.retry_backoff = {.initial = absl::Milliseconds(100),
                                                     .max = absl::Seconds(1),
                                                     .factor = 2.0,
                                                     .jitter = 0}});
  ASSERT_TRUE(client->Get(Node::kResource, "", "n1").ok());
  std::vector<absl::Duration> gaps = Gaps(server);
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_GE(gaps[0], absl::Milliseconds(100));
  EXPECT_GE(gaps[1], absl::Milliseconds(200));
  EXPECT_GE(gaps[2], absl::Milliseconds(400));
}

// A write answered with a plain 500 may have been applied: it is not sent again.
TEST(ClientRetryTest, DoesNotRetryAPlainServerErrorOnAWrite) {
  CannedHttpServer server({{500, kInternal, ""}, {201, kNode, ""}});
  auto client = ClientFor(server);
  auto r = client->Create(Node::kResource, "", nlohmann::json::parse(kNode));
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("leader changed"));
  EXPECT_EQ(server.requests().size(), 1u);
}

// A server that never recovers costs max_retries + 1 requests, then its error.
TEST(ClientRetryTest, ServerErrorsOnReadsGiveUpAfterMaxRetries) {
  CannedHttpServer server({{500, kInternal, ""}});
  auto client = ClientFor(server, {.max_retries = 2,
                                   .retry_backoff = {.initial = absl::Milliseconds(10),
                                                     .max = absl::Milliseconds(10)}});
  auto r = client->Get(Node::kResource, "", "n1");
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("get nodes n1"));
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(ClientRetryTest, DoesNotRetryOtherErrors) {
  CannedHttpServer server(
      {{409, R"({"kind":"Status","reason":"Conflict","message":"changed"})", ""}});
  auto client = ClientFor(server);
  auto r = client->Update(Node::kResource, "", nlohmann::json::parse(kNode));
  EXPECT_TRUE(IsConflict(r.status())) << r.status();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(ClientRetryTest, RateLimiterSpacesRequestsBeyondTheBurst) {
  CannedHttpServer server({{200, kNode, ""}});
  auto client = ClientFor(server, {.qps = 10, .burst = 2});
  absl::Time start = absl::Now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->Get(Node::kResource, "", "n1").ok());
  // 2 requests ride the burst, the next 3 wait ~100 ms each.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
}

TEST(ClientRetryTest, NonJsonSuccessBodyIsAnError) {
  CannedHttpServer server({{200, "not json", ""}});
  auto client = ClientFor(server);
  auto r = client->Get(Node::kResource, "", "n1");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("get nodes n1"));
}

TEST(ClientAuthTest, BearerTokenFileIsReReadWhenItChanges) {
  char tmpl[] = "/tmp/token-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  std::string token_file = dir + "/token";
  ASSERT_TRUE(WriteFileAtomically(token_file, "first-token\n").ok());
  CannedHttpServer server({{200, kNode, ""}});
  RestConfig cfg;
  cfg.server = server.url();
  cfg.bearer_token_file = token_file;
  auto client = Client::Create(cfg);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Get(Node::kResource, "", "n1").ok());
  // Projected service-account tokens are replaced in place (a new file renamed over the old).
  ASSERT_TRUE(WriteFileAtomically(token_file, "second-token\n").ok());
  ASSERT_TRUE((*client)->Get(Node::kResource, "", "n1").ok());
  auto heads = server.heads();
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_THAT(heads[0], ::testing::HasSubstr("Authorization: Bearer first-token"));
  EXPECT_THAT(heads[1], ::testing::HasSubstr("Authorization: Bearer second-token"));
  std::system(("rm -rf " + dir).c_str());
}

TEST(ClientAuthTest, MissingTokenFileIsAClearError) {
  RestConfig cfg;
  cfg.server = "https://127.0.0.1:1";
  cfg.bearer_token_file = "/nonexistent/token";
  auto client = Client::Create(cfg);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(std::string(client.status().message()), ::testing::HasSubstr("/nonexistent/token"));
}

}  // namespace
}  // namespace dra::k8s
