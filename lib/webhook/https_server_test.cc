// The webhook over real TLS: certificates made at test time, the real HTTPS server on a free
// port, the real router and admission handler.

#include "lib/webhook/https_server.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
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
    auto server = HttpsServer::Start(options, certs_.get(), std::move(handler));
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

TEST(ServingCertificateTest, LoadErrorsNameTheFile) {
  auto missing = ServingCertificate::Load({"/nonexistent/tls.crt", "/nonexistent/tls.key"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/tls.crt"));
}

}  // namespace
}  // namespace dra::webhook
