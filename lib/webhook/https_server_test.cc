// The webhook over real TLS: certificates made at test time, the real HTTPS server on a free
// port, the real router and admission handler.

#include "lib/webhook/https_server.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/metrics/metrics.h"
#include "lib/webhook/testing/tls_testing.h"
#include "lib/webhook/tls_certs.h"
#include "lib/webhook/webhook.h"
#include "nlohmann/json.hpp"

namespace dra::webhook {
namespace {

using testing::ClientResponse;
using ::testing::HasSubstr;
using testing::Pem;
using testing::TlsClient;

constexpr absl::string_view kReview =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
    R"("operation":"CREATE","resource":{"group":"resource.k8s.io","version":"v1",)"
    R"("resource":"resourceclaims"},"object":{"spec":{"devices":{"config":[{"opaque":)"
    R"({"driver":"gpu.nvidia.com","parameters":{"apiVersion":"resource.nvidia.com/v1beta1",)"
    R"("kind":"GpuConfig","sharing":{"strategy":"STRATEGY"}}}}]}}}}})";

std::string ReviewWith(absl::string_view strategy) {
  std::string s(kReview);
  s.replace(s.find("STRATEGY"), 8, std::string(strategy));
  return s;
}

// Writes `data` to `path` through a temporary file and a rename, as a secret volume update does.
void ReplaceFile(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::trunc) << data;
  std::filesystem::rename(tmp, path);
}

class HttpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/webhook-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cert_file_ = dir_ + "/tls.crt";
    key_file_ = dir_ + "/tls.key";
    auto ca = testing::GenerateCa("test-ca");
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    WriteServerCert("server-1");
    ASSERT_TRUE(api::RegisterDriverFeatureGates(gates_).ok());
    ASSERT_TRUE(gates_.Set("TimeSlicingSettings=true").ok());
  }

  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void WriteServerCert(absl::string_view cn) {
    auto leaf = testing::GenerateServerCert(ca_, cn, {"127.0.0.1", "localhost"});
    ASSERT_TRUE(leaf.ok()) << leaf.status();
    ReplaceFile(key_file_, leaf->key);
    ReplaceFile(cert_file_, leaf->cert + ca_.cert);
  }

  void StartServer(HttpsServerOptions options = {}, HttpsHandler handler = nullptr) {
    auto certs = ServingCertificate::Load({cert_file_, key_file_, absl::ZeroDuration()});
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *std::move(certs);
    options.address = "127.0.0.1:0";
    if (handler == nullptr) handler = MakeWebhookHandler(&gates_, &metrics_);
    auto server = StartHttpsServer(options, certs_.get(), std::move(handler));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<TlsClient> Connect() {
    auto client = TlsClient::Connect(server_->port(), ca_.cert);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::string dir_, cert_file_, key_file_;
  Pem ca_;
  FeatureGates gates_;
  metrics::Registry registry_;
  WebhookMetrics metrics_{&registry_};
  std::unique_ptr<ServingCertificate> certs_;
  std::unique_ptr<HttpsServer> server_;
};

TEST_F(HttpsServerTest, ReadyzAndRouting) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  auto r = c->Do("GET", "/readyz", "", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body, "ok");
  r = c->Do("GET", "/readyz?verbose", "", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 200);
  r = c->Do("GET", "/nope", "", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 404);
  r = c->Do("GET", std::string(kValidatePath), "", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 405);
  r = c->Do("POST", "/readyz", "application/json", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 405);
}

TEST_F(HttpsServerTest, ManyRequestsShareOneKeptAliveConnection) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 10; ++i) {
    bool valid = i % 2 == 0;
    auto r = c->Do("POST", std::string(kValidatePath), "application/json",
                   ReviewWith(valid ? "TimeSlicing" : "Fabric"));
    ASSERT_TRUE(r.ok()) << "request " << i << ": " << r.status();
    EXPECT_EQ(r->code, 200);
    EXPECT_EQ(r->content_type, "application/json");
    EXPECT_FALSE(r->connection_close);
    auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j["response"]["uid"], "u-1");
    EXPECT_EQ(j["response"]["allowed"], valid) << r->body;
    if (!valid) {
      EXPECT_THAT(j["response"]["status"]["message"].get<std::string>(),
                  HasSubstr("spec.devices.config[0].opaque.parameters.sharing.strategy"));
    }
  }
  // Two requests in one write (pipelined) are answered in order.
  std::string body = ReviewWith("TimeSlicing");
  std::string req =
      absl::StrCat("POST ", kValidatePath,
                   " HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                   "\r\n\r\n", body);
  ASSERT_TRUE(c->WriteRaw(req + "GET /readyz HTTP/1.1\r\n\r\n").ok());
  auto first = c->ReadResponse();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->body, HasSubstr("\"allowed\":true"));
  auto second = c->ReadResponse();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->body, "ok");

  std::string rendered = registry_.Render();
  EXPECT_THAT(rendered,
              HasSubstr("nvidia_dra_webhook_admission_reviews_total{result=\"allowed\"} 6"));
  EXPECT_THAT(rendered,
              HasSubstr("nvidia_dra_webhook_admission_reviews_total{result=\"denied\"} 5"));
  EXPECT_THAT(rendered, HasSubstr("nvidia_dra_webhook_admission_review_duration_seconds_count 11"));
}

TEST_F(HttpsServerTest, WrongContentTypeIs415OverTheWire) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  auto r = c->Do("POST", std::string(kValidatePath), "application/json; charset=utf-8",
                 ReviewWith("TimeSlicing"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 415);
  EXPECT_EQ(r->body, "contentType=application/json; charset=utf-8, expected application/json\n");
  r = c->Do("POST", std::string(kValidatePath), "application/json", "{not json");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->code, 400);
  EXPECT_FALSE(r->connection_close);  // a bad review does not cost the connection
  EXPECT_TRUE(c->Do("GET", "/readyz", "", "").ok());
}

TEST_F(HttpsServerTest, CertificateIsReloadedForNewConnections) {
  StartServer();
  auto old_conn = Connect();
  ASSERT_NE(old_conn, nullptr);
  EXPECT_EQ(old_conn->PeerCommonName(), "server-1");

  WriteServerCert("server-2");
  auto c2 = Connect();
  ASSERT_NE(c2, nullptr);
  EXPECT_EQ(c2->PeerCommonName(), "server-2");
  EXPECT_EQ(certs_->reloads(), 1);
  // The connection made before keeps working.
  auto r = old_conn->Do("GET", "/readyz", "", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "ok");

  // A broken pair is not used: the last good one stays.
  ReplaceFile(cert_file_, "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n");
  auto c3 = Connect();
  ASSERT_NE(c3, nullptr);
  EXPECT_EQ(c3->PeerCommonName(), "server-2");
  EXPECT_EQ(certs_->reloads(), 1);
  // A key that does not match the certificate is refused too.
  auto other = testing::GenerateServerCert(ca_, "server-3", {"127.0.0.1"});
  ASSERT_TRUE(other.ok());
  auto fourth = testing::GenerateServerCert(ca_, "server-4", {"127.0.0.1"});
  ASSERT_TRUE(fourth.ok());
  ReplaceFile(cert_file_, other->cert);
  ReplaceFile(key_file_, fourth->key);
  auto c4 = Connect();
  ASSERT_NE(c4, nullptr);
  EXPECT_EQ(c4->PeerCommonName(), "server-2");

  // Repaired: used again.
  WriteServerCert("server-5");
  auto c5 = Connect();
  ASSERT_NE(c5, nullptr);
  EXPECT_EQ(c5->PeerCommonName(), "server-5");
  EXPECT_EQ(certs_->reloads(), 2);
}

// TLS 1.2 is ECDHE with an AEAD cipher only: a client that offers RSA key exchange, DHE or CBC
// suites alone gets no handshake, whatever the certificate's key (an RSA key allows the most).
TEST_F(HttpsServerTest, Tls12NegotiatesOnlyEcdheAeadSuites) {
  for (testing::KeyType key : {testing::KeyType::kRsa2048, testing::KeyType::kEcP256}) {
    const bool rsa = key == testing::KeyType::kRsa2048;
    SCOPED_TRACE(rsa ? "RSA certificate" : "ECDSA certificate");
    auto leaf = testing::GenerateServerCert(ca_, "server-1", {"127.0.0.1"}, key);
    ASSERT_TRUE(leaf.ok()) << leaf.status();
    ReplaceFile(key_file_, leaf->key);
    ReplaceFile(cert_file_, leaf->cert + ca_.cert);
    server_.reset();
    StartServer();
    for (const char* refused :
         {"AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA", "AES256-SHA256",
          "DHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA", "ECDHE-ECDSA-AES128-SHA",
          "ECDHE-RSA-AES256-SHA384", "ECDHE-ECDSA-AES256-SHA384"}) {
      absl::StatusOr<std::string> got = testing::Tls12Handshake(server_->port(), refused);
      EXPECT_FALSE(got.ok()) << refused << " was negotiated: " << *got;
    }
    const std::vector<std::string> accepted =
        rsa ? std::vector<std::string>{"ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
                                       "ECDHE-RSA-CHACHA20-POLY1305"}
            : std::vector<std::string>{"ECDHE-ECDSA-AES128-GCM-SHA256",
                                       "ECDHE-ECDSA-AES256-GCM-SHA384",
                                       "ECDHE-ECDSA-CHACHA20-POLY1305"};
    for (const std::string& suite : accepted) {
      absl::StatusOr<std::string> got = testing::Tls12Handshake(server_->port(), suite);
      ASSERT_TRUE(got.ok()) << suite << ": " << got.status();
      EXPECT_EQ(*got, suite);
    }
    // A client that offers everything gets an ECDHE suite.
    absl::StatusOr<std::string> any = testing::Tls12Handshake(server_->port(), "ALL:@SECLEVEL=0");
    ASSERT_TRUE(any.ok()) << any.status();
    EXPECT_TRUE(absl::StartsWith(*any, "ECDHE-")) << *any;
  }
}

TEST_F(HttpsServerTest, UntrustedCaIsRejectedByTheClient) {
  StartServer();
  auto other_ca = testing::GenerateCa("other-ca");
  ASSERT_TRUE(other_ca.ok());
  auto c = TlsClient::Connect(server_->port(), other_ca->cert);
  EXPECT_FALSE(c.ok());
  // And the hostname is checked: the certificate is for 127.0.0.1 and localhost only.
  auto wrong_host = TlsClient::Connect(server_->port(), ca_.cert, "example.com");
  EXPECT_FALSE(wrong_host.ok());
}

TEST_F(HttpsServerTest, OversizedBodyIs413AndClosesTheConnection) {
  HttpsServerOptions options;
  options.max_body_bytes = 1024;
  StartServer(options);
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->WriteRaw(absl::StrCat("POST ", kValidatePath,
                                       " HTTP/1.1\r\nContent-Type: application/json\r\n"
                                       "Content-Length: 4096\r\n\r\n"))
                  .ok());
  auto r = c->ReadResponse();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 413);
  EXPECT_TRUE(r->connection_close);
  EXPECT_FALSE(c->Do("GET", "/readyz", "", "").ok());
}

TEST_F(HttpsServerTest, ProtocolEdges) {
  StartServer();
  {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    auto r = c->Do("GET", "/readyz", "", "", "Connection: close\r\n");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body, "ok");
    EXPECT_TRUE(r->connection_close);
  }
  {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    auto r = c->Do("POST", std::string(kValidatePath), "application/json",
                   ReviewWith("TimeSlicing"), "Expect: 100-continue\r\n");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->code, 200);
    EXPECT_THAT(r->body, HasSubstr("\"allowed\":true"));
  }
  {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->WriteRaw(absl::StrCat("POST ", kValidatePath,
                                         " HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"))
                    .ok());
    auto r = c->ReadResponse();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->code, 501);
  }
  {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->WriteRaw("GET /readyz HTTP/1.0\r\n\r\n").ok());
    auto r = c->ReadResponse();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body, "ok");
    EXPECT_TRUE(r->connection_close);
  }
  {
    // HEAD: headers only; the connection stays in sync for the next request.
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    auto r = c->Do("HEAD", "/readyz", "", "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->code, 200);
    EXPECT_EQ(r->body, "");
    r = c->Do("GET", "/readyz", "", "");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->code, 200);
    EXPECT_EQ(r->body, "ok");
  }
  {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->WriteRaw("garbage\r\n\r\n").ok());
    auto r = c->ReadResponse();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->code, 400);
  }
}

TEST_F(HttpsServerTest, StopClosesIdleConnections) {
  HttpsServerOptions options;
  // Were idle connections not closed at once, Stop would wait for this (and the test time out).
  options.shutdown_grace = absl::Hours(1);
  StartServer(options);
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Do("GET", "/readyz", "", "").ok());
  server_->Stop();  // must not wait for the idle connection's 120s idle timeout
  EXPECT_FALSE(c->Do("GET", "/readyz", "", "").ok());
  EXPECT_FALSE(TlsClient::Connect(server_->port(), ca_.cert).ok());
}

TEST_F(HttpsServerTest, StopLetsARequestInFlightFinish) {
  absl::Notification entered, release;
  HttpsServerOptions options;
  options.shutdown_grace = absl::Hours(1);
  StartServer(options, [&](const HttpRequest&) {
    entered.Notify();
    release.WaitForNotification();
    return HttpResponse{.body = "done"};
  });
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  absl::StatusOr<ClientResponse> r;
  std::thread request([&] { r = c->Do("GET", "/slow", "", ""); });
  entered.WaitForNotification();
  std::thread stopper([&] { server_->Stop(); });
  // Once the listener is closed, Stop has begun; then let the handler finish.
  while (true) {
    auto probe = TlsClient::Connect(server_->port(), ca_.cert);
    if (!probe.ok()) break;
  }
  release.Notify();
  request.join();
  stopper.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "done");
  EXPECT_TRUE(r->connection_close);
}

// A review whose request.object nests `levels` objects below it, {"a":{"a":...}}.
std::string DeepReview(int levels) {
  std::string object;
  for (int i = 1; i < levels; ++i) object += R"({"a":)";
  object += "{}" + std::string(levels - 1, '}');
  std::string review(kReview);
  size_t at = review.find(R"("object":)") + 9;
  return review.substr(0, at) + object + "}}";
}

// Waits until `done` holds (a condition the server reaches on its own threads), at most 10 s.
bool WaitUntil(const std::function<bool()>& done) {
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST_F(HttpsServerTest, DeepReviewIs400AndTheServerKeepsServing) {
  StartServer();
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  // 60,000 levels: 360 KB, within the body limit; the process used to die of a stack overflow.
  std::string deep = DeepReview(60000);
  ASSERT_GT(deep.size(), 350000u);
  auto r = c->Do("POST", std::string(kValidatePath), "application/json", deep);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 400);
  EXPECT_EQ(r->body,
            "could not decode the request body as an AdmissionReview: JSON nested deeper than "
            "10002 levels (request.object may nest 10000, the most the API server decodes)\n");
  EXPECT_FALSE(r->connection_close);
  // The same connection, and a new one, are served.
  r = c->Do("POST", std::string(kValidatePath), "application/json", ReviewWith("TimeSlicing"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_THAT(r->body, HasSubstr("\"allowed\":true"));
  auto c2 = Connect();
  ASSERT_NE(c2, nullptr);
  r = c2->Do("POST", std::string(kValidatePath), "application/json", DeepReview(10000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200) << r->body.substr(0, 200);  // at the limit: decided
  EXPECT_THAT(registry_.Render(),
              HasSubstr("nvidia_dra_webhook_admission_reviews_total{result=\"bad_request\"} 1"));
}

TEST_F(HttpsServerTest, ConcurrentLargeBodiesShareOneBudget) {
  constexpr size_t kBody = 200000;
  HttpsServerOptions options;
  options.max_body_bytes = kBody;
  // Three requests of kBody fit (each also holds its header, about 130 bytes), a fourth does not.
  options.max_buffered_request_bytes = 3 * kBody + 20000;
  options.registry = &registry_;
  StartServer(options);
  // A valid review padded with whitespace to kBody bytes.
  std::string body = ReviewWith("TimeSlicing");
  body.append(kBody - body.size(), ' ');
  std::string header =
      absl::StrCat("POST ", kValidatePath,
                   " HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ", kBody,
                   "\r\nExpect: 100-continue\r\n\r\n");
  // Each header takes its whole request's buffer from the budget before the body is read; the
  // 100 Continue says it has.
  std::vector<std::unique_ptr<TlsClient>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(Connect());
    ASSERT_NE(held.back(), nullptr);
    ASSERT_TRUE(held.back()->WriteRaw(header).ok());
    auto r = held.back()->ReadResponse(/*head=*/false, /*interim=*/true);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->code, 100) << "request " << i << ": " << r->body;
  }
  EXPECT_GE(server_->request_budget().used(), 3 * kBody);
  EXPECT_LE(server_->request_budget().used(), options.max_buffered_request_bytes);
  // The fourth does not fit: 503 naming the limit, before its body is sent.
  auto over = Connect();
  ASSERT_NE(over, nullptr);
  ASSERT_TRUE(over->WriteRaw(header).ok());
  auto r = over->ReadResponse(/*head=*/false, /*interim=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 503);
  EXPECT_TRUE(r->connection_close);
  EXPECT_EQ(r->body, absl::StrCat("the webhook's buffers for requests and responses are full (at "
                                  "most ",
                                  options.max_buffered_request_bytes,
                                  " bytes across all connections, --max-buffered-request-bytes); "
                                  "retry\n"));
  EXPECT_EQ(server_->request_budget().refused(), 1);
  // Small requests on another connection are still served (their buffers fit).
  auto small = Connect();
  ASSERT_NE(small, nullptr);
  r = small->Do("POST", std::string(kValidatePath), "application/json", ReviewWith("TimeSlicing"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  // The three bodies arrive and are answered.
  for (auto& c : held) ASSERT_TRUE(c->WriteRaw(body).ok());
  for (auto& c : held) {
    auto done = c->ReadResponse();
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->code, 200);
    EXPECT_THAT(done->body, HasSubstr("\"allowed\":true"));
  }
  // Answered requests give their buffers back (those over 16 KiB are freed; the small
  // connection keeps its few hundred bytes for its next request).
  EXPECT_TRUE(WaitUntil([&] { return server_->request_budget().used() < 16 << 10; }))
      << server_->request_budget().used();
  // So a large request fits again.
  auto again = Connect();
  ASSERT_NE(again, nullptr);
  r = again->Do("POST", std::string(kValidatePath), "application/json", body);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  std::string rendered = registry_.Render();
  EXPECT_THAT(rendered, HasSubstr("nvidia_dra_webhook_request_buffer_refused_total 1"));
  EXPECT_THAT(rendered, HasSubstr("nvidia_dra_webhook_request_buffer_bytes "));
}

TEST_F(HttpsServerTest, LargeResponsesCountAgainstTheBudget) {
  HttpsServerOptions options;
  options.max_body_bytes = 100000;
  options.max_buffered_request_bytes = options.max_header_bytes + options.max_body_bytes;
  // Larger than the whole budget: never held.
  StartServer(options, [](const HttpRequest& req) {
    return HttpResponse{.body = std::string(req.path == "/big" ? 200000 : 2000, 'x')};
  });
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  auto r = c->Do("GET", "/fits", "", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body.size(), 2000u);
  r = c->Do("GET", "/big", "", "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 503);
  EXPECT_THAT(r->body, HasSubstr("--max-buffered-request-bytes"));
  EXPECT_TRUE(r->connection_close);
  EXPECT_EQ(server_->request_budget().refused(), 1);
}

TEST_F(HttpsServerTest, BudgetBelowOneLargestRequestIsRefused) {
  auto certs = ServingCertificate::Load({cert_file_, key_file_, absl::ZeroDuration()});
  ASSERT_TRUE(certs.ok()) << certs.status();
  HttpsServerOptions options;
  options.address = "127.0.0.1:0";
  options.max_buffered_request_bytes = options.max_body_bytes;  // no room for the header
  auto server =
      StartHttpsServer(options, certs->get(), [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("below one largest request"));
}

TEST_F(HttpsServerTest, RunWebhookRefusesABudgetBelowOneLargestRequest) {
  WebhookConfig config;
  config.tls_cert_file = cert_file_;
  config.tls_private_key_file = key_file_;
  config.bind_address = "127.0.0.1";
  config.port = 0;
  config.gates = &gates_;
  config.max_buffered_request_bytes = 1 << 20;
  // Refused before it serves, so no signal handler is needed.
  absl::Status s = RunWebhook(config, /*signals=*/nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--max-buffered-request-bytes 1048576 is below one largest request (3211264 bytes: "
            "65536 of header, 3145728 of body), which could never be read");
}

// The generated metrics reference (MetricsMarkdown, docs/reference.md) lists exactly the families
// the running webhook registers.
TEST_F(HttpsServerTest, MetricsMarkdownIsWhatStartWebhookRegisters) {
  WebhookConfig config;
  config.tls_cert_file = cert_file_;
  config.tls_private_key_file = key_file_;
  config.bind_address = "127.0.0.1";
  config.port = 0;
  config.http_endpoint = "127.0.0.1:0";
  config.gates = &gates_;
  absl::StatusOr<WebhookServers> s = StartWebhook(config);
  ASSERT_TRUE(s.ok()) << s.status();
  std::string live = metrics::DescribeMarkdown(*s->registry);
  s->server->Stop();
  s->metrics_server->Stop();
  EXPECT_THAT(live, HasSubstr("| `nvidia_dra_webhook_admission_reviews_total` | counter | "
                              "`result` |"));
  EXPECT_THAT(live, HasSubstr("| `nvidia_dra_http_endpoint_connections_open` | gauge | - |"));
  EXPECT_EQ(MetricsMarkdown(), live);
}

TEST(ServingCertificateTest, LoadErrorsNameTheFile) {
  auto missing = ServingCertificate::Load({"/nonexistent/tls.crt", "/nonexistent/tls.key"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/tls.crt"));
}

}  // namespace
}  // namespace dra::webhook
