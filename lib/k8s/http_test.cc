// HttpTransport on loopback servers: keep-alive reuse, retries on connections the server closed,
// chunked streams, timeouts, malformed answers, and TLS (verification against the configured CA,
// name checks, SNI, client certificates).

#include "lib/k8s/http.h"

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/test_http_server.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using testing::Pem;
using testing::ServerConn;
using testing::TestCa;
using testing::TestHttpServer;

std::unique_ptr<HttpTransport> TransportFor(RestConfig cfg) {
  auto t = HttpTransport::Create(std::move(cfg));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::unique_ptr<HttpTransport> TransportFor(const TestHttpServer& server) {
  return TransportFor(RestConfig{.server = server.url()});
}

// Answers every request on the connection with `{}` and keeps the connection open.
void KeepAlive(ServerConn& c) {
  std::string head;
  while (c.ReadRequest(&head)) c.Write(TestHttpServer::Response(200, "{}"));
}

// Waits until the server has finished with `n` connections.
void WaitClosed(const TestHttpServer& server, int n) {
  while (server.closed() < n) absl::SleepFor(absl::Milliseconds(5));
}

TEST(HttpTransportTest, KeepAliveConnectionIsReused) {
  std::atomic<int> requests{0};
  TestHttpServer server([&](ServerConn& c) {
    std::string head, body;
    while (c.ReadRequest(&head, &body)) {
      ++requests;
      c.Write(TestHttpServer::Response(200, absl::StrCat("{\"got\":\"", body, "\"}")));
    }
  });
  auto t = TransportFor(server);
  auto a = t->Do({.method = "GET", .path_and_query = "/a"});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b =
      t->Do({.method = "POST", .path_and_query = "/b", .content_type = "text/plain", .body = "hi"});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->code, 200);
  EXPECT_EQ(b->content_type, "application/json");
  EXPECT_EQ(b->body, "{\"got\":\"hi\"}");
  EXPECT_EQ(requests.load(), 2);
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpTransportTest, RequestHeadCarriesHostAuthAndNoAcceptEncoding) {
  std::string seen;
  TestHttpServer server([&](ServerConn& c) {
    std::string head;
    if (c.ReadRequest(&head)) {
      seen = head;
      c.Write(TestHttpServer::Response(200, "{}"));
    }
  });
  auto t = TransportFor(RestConfig{.server = server.url() + "/prefix", .bearer_token = "tok"});
  ASSERT_TRUE(t->Do({.path_and_query = "/api/v1/nodes?limit=1"}).ok());
  EXPECT_THAT(seen, HasSubstr("GET /prefix/api/v1/nodes?limit=1 HTTP/1.1\r\n"));
  EXPECT_THAT(seen, HasSubstr("\r\nHost: 127.0.0.1:"));
  EXPECT_THAT(seen, HasSubstr("\r\nAuthorization: Bearer tok"));
  EXPECT_THAT(seen, HasSubstr("\r\nAccept: application/json"));
  EXPECT_THAT(seen, ::testing::Not(HasSubstr("Accept-Encoding")));
}

TEST(HttpTransportTest, ConnectionClosedWhileIdleIsReplacedForAnyMethod) {
  // Each connection answers one request as keep-alive, then the server closes it.
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (c.ReadRequest(&head)) c.Write(TestHttpServer::Response(200, "{}"));
  });
  auto t = TransportFor(server);
  ASSERT_TRUE(t->Do({.method = "GET", .path_and_query = "/1"}).ok());
  WaitClosed(server, 1);
  auto post = t->Do({.method = "POST", .path_and_query = "/2", .body = "{}"});
  ASSERT_TRUE(post.ok()) << post.status();
  EXPECT_EQ(post->code, 200);
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpTransportTest, RequestLostOnAClosingConnectionIsRetriedOnlyWhenIdempotent) {
  // The first connection answers one request, then reads the next and closes without an answer:
  // the request was sent, so only an idempotent one may be sent again.
  auto handler = [](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    c.Write(TestHttpServer::Response(200, "{}"));
    if (c.index() == 0) {
      (void)c.ReadRequest(&head);
      return;
    }
    while (c.ReadRequest(&head)) c.Write(TestHttpServer::Response(200, "{}"));
  };
  {
    TestHttpServer server(handler);
    auto t = TransportFor(server);
    ASSERT_TRUE(t->Do({.path_and_query = "/1"}).ok());
    auto get = t->Do({.method = "GET", .path_and_query = "/2"});
    ASSERT_TRUE(get.ok()) << get.status();
    EXPECT_EQ(server.connections(), 2);
  }
  {
    TestHttpServer server(handler);
    auto t = TransportFor(server);
    ASSERT_TRUE(t->Do({.path_and_query = "/1"}).ok());
    auto post = t->Do({.method = "POST", .path_and_query = "/2", .body = "{}"});
    EXPECT_EQ(post.status().code(), absl::StatusCode::kUnavailable) << post.status();
    EXPECT_THAT(std::string(post.status().message()),
                HasSubstr("POST " + server.url() + "/2: connection closed before any response"));
    EXPECT_EQ(server.connections(), 1);
  }
}

TEST(HttpTransportTest, ConcurrentRequestsUseSeparateConnections) {
  absl::Notification both_in;
  std::atomic<int> waiting{0};
  TestHttpServer server([&](ServerConn& c) {
    std::string head;
    while (c.ReadRequest(&head)) {
      if (++waiting == 2) both_in.Notify();
      both_in.WaitForNotification();  // answers only once both requests are in flight
      c.Write(TestHttpServer::Response(200, "{}"));
    }
  });
  auto t = TransportFor(server);
  std::thread other([&] { EXPECT_TRUE(t->Do({.path_and_query = "/a"}).ok()); });
  EXPECT_TRUE(t->Do({.path_and_query = "/b"}).ok());
  other.join();
  EXPECT_EQ(server.connections(), 2);
  // Both went back to the pool: two more requests open nothing new.
  EXPECT_TRUE(t->Do({.path_and_query = "/c"}).ok());
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpTransportTest, ConnectionRefusedNamesTheServer) {
  auto t = TransportFor(RestConfig{.server = "http://127.0.0.1:1"});
  auto r = t->Do({.path_and_query = "/x"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("GET http://127.0.0.1:1/x: connect to 127.0.0.1:1: connection refused"));
}

TEST(HttpTransportTest, SilentServerTimesOut) {
  TestHttpServer server([](ServerConn& c) { c.WaitForClose(); });
  auto t = TransportFor(server);
  auto r = t->Do({.path_and_query = "/slow", .timeout = absl::Milliseconds(200)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr(server.url() + "/slow: timed out after 200ms waiting for the response"));
}

TEST(HttpTransportTest, MalformedAnswerIsAnErrorAndTheConnectionIsDropped) {
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    while (c.ReadRequest(&head)) {
      if (c.index() == 0) {
        c.Write("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n");
      } else {
        c.Write(TestHttpServer::Response(200, "{}"));
      }
    }
  });
  auto t = TransportFor(server);
  auto bad = t->Do({.path_and_query = "/x"});
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("malformed HTTP response"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(server.url()));
  EXPECT_TRUE(t->Do({.path_and_query = "/y"}).ok());
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpTransportTest, TruncatedBodyIsAnError) {
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (c.ReadRequest(&head)) c.Write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  });
  auto t = TransportFor(server);
  auto r = t->Do({.path_and_query = "/x"});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("after 3 of 10 body bytes"));
}

TEST(HttpTransportTest, StreamDeliversChunksAndEndsWhenStopped) {
  absl::Notification sent;
  TestHttpServer server([&](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    c.Write(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n");
    c.Write("7\r\n{\"a\":1}\r\n");
    absl::SleepFor(absl::Milliseconds(20));
    c.Write("2\r\n\n{\r\n");
    c.Write("6\r\n\"b\":2}\r\n");
    sent.Notify();
    c.WaitForClose();  // the stream stays open, as a watch does
  });
  auto t = TransportFor(server);
  std::string got;
  auto r = t->Stream(
      {.path_and_query = "/watch", .timeout = absl::InfiniteDuration()},
      [&](absl::string_view chunk) {
        got.append(chunk.data(), chunk.size());
        return true;
      },
      [&] { return sent.HasBeenNotified() && got.size() == 15; });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body, "");
  EXPECT_EQ(got, "{\"a\":1}\n{\"b\":2}");
}

TEST(HttpTransportTest, StreamStopsWhenOnDataSaysSo) {
  TestHttpServer server([&](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    c.Write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    c.WaitForClose();
  });
  auto t = TransportFor(server);
  int calls = 0;
  auto r = t->Stream(
      {.path_and_query = "/watch", .timeout = absl::InfiniteDuration()},
      [&](absl::string_view) { return ++calls < 1; }, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, 1);
}

TEST(HttpTransportTest, StreamEndedByTheServerReusesTheConnection) {
  TestHttpServer server([&](ServerConn& c) {
    std::string head;
    while (c.ReadRequest(&head)) {
      c.Write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    }
  });
  auto t = TransportFor(server);
  for (int i = 0; i < 2; ++i) {
    std::string got;
    auto r = t->Stream(
        {.path_and_query = "/watch", .timeout = absl::InfiniteDuration()},
        [&](absl::string_view c) {
          got.append(c.data(), c.size());
          return true;
        },
        nullptr);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(got, "abc");
  }
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpTransportTest, StreamErrorAnswerComesBackAsBody) {
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (c.ReadRequest(&head)) {
      c.Write(TestHttpServer::Response(410, R"({"reason":"Expired"})"));
    }
  });
  auto t = TransportFor(server);
  bool called = false;
  auto r = t->Stream(
      {.path_and_query = "/watch", .timeout = absl::InfiniteDuration()},
      [&](absl::string_view) { return called = true; }, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->code, 410);
  EXPECT_EQ(r->body, R"({"reason":"Expired"})");
  EXPECT_FALSE(called);
}

TEST(HttpTransportTest, BadServerUrlIsACreateError) {
  auto t = HttpTransport::Create(RestConfig{.server = "ftp://x", .source = "kubeconfig /k"});
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("kubeconfig /k: server URL \"ftp://x\" must start with https://"));
}

class HttpTransportTlsTest : public ::testing::Test {
 protected:
  HttpTransportTlsTest() : ca_("test-ca"), other_ca_("other-ca") {}
  TestCa ca_;
  TestCa other_ca_;
};

TEST_F(HttpTransportTlsTest, VerifiesTheServerAgainstTheConfiguredCaAndReusesConnections) {
  TestHttpServer server(KeepAlive, {.server = ca_.IssueServer("server", "IP:127.0.0.1")});
  auto t = TransportFor(RestConfig{.server = server.url(), .ca_pem = ca_.cert_pem()});
  for (int i = 0; i < 3; ++i) {
    auto r = t->Do({.path_and_query = "/x"});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->body, "{}");
  }
  // TLS 1.3 session tickets arriving after the handshake do not make a pooled connection look
  // closed.
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(HttpTransportTlsTest, WrongCaFailsWithTheVerifyReason) {
  TestHttpServer server(KeepAlive, {.server = ca_.IssueServer("server", "IP:127.0.0.1")});
  auto t = TransportFor(RestConfig{.server = server.url(), .ca_pem = other_ca_.cert_pem()});
  auto r = t->Do({.path_and_query = "/x"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  std::string msg(r.status().message());
  EXPECT_THAT(msg, HasSubstr("GET " + server.url() + "/x: TLS handshake with 127.0.0.1:"));
  EXPECT_THAT(msg, HasSubstr("server certificate verify failed: unable to get local issuer"));
}

TEST_F(HttpTransportTlsTest, CertificateForAnotherAddressFails) {
  TestHttpServer server(KeepAlive, {.server = ca_.IssueServer("server", "IP:127.0.0.2")});
  auto t = TransportFor(RestConfig{.server = server.url(), .ca_pem = ca_.cert_pem()});
  auto r = t->Do({.path_and_query = "/x"});
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("IP address mismatch (the certificate is not valid for \"127.0.0.1\")"));
}

TEST_F(HttpTransportTlsTest, TlsServerNameIsSentAndVerified) {
  std::string sni;
  TestHttpServer server(
      [&](ServerConn& c) {
        sni = c.sni();
        KeepAlive(c);
      },
      {.server = ca_.IssueServer("api", "DNS:api.test")});
  auto wrong = TransportFor(RestConfig{.server = server.url(), .ca_pem = ca_.cert_pem()});
  EXPECT_FALSE(wrong->Do({.path_and_query = "/x"}).ok());
  auto t = TransportFor(
      RestConfig{.server = server.url(), .ca_pem = ca_.cert_pem(), .tls_server_name = "api.test"});
  auto r = t->Do({.path_and_query = "/x"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(sni, "api.test");
}

TEST_F(HttpTransportTlsTest, InsecureSkipVerifyAcceptsAnyCertificate) {
  TestHttpServer server(KeepAlive, {.server = other_ca_.IssueServer("server", "DNS:elsewhere")});
  auto t = TransportFor(RestConfig{.server = server.url(), .insecure_skip_tls_verify = true});
  auto r = t->Do({.path_and_query = "/x"});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(HttpTransportTlsTest, ClientCertificateAuthenticates) {
  TestHttpServer server(KeepAlive, {.server = ca_.IssueServer("server", "IP:127.0.0.1"),
                                    .client_ca_pem = ca_.cert_pem()});
  auto anonymous = TransportFor(RestConfig{.server = server.url(), .ca_pem = ca_.cert_pem()});
  auto denied = anonymous->Do({.path_and_query = "/x"});
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kUnavailable) << denied.status();
  EXPECT_THAT(std::string(denied.status().message()), HasSubstr("certificate required"));

  Pem client = ca_.IssueClient("user");
  auto t = TransportFor(RestConfig{.server = server.url(),
                                   .ca_pem = ca_.cert_pem(),
                                   .client_cert_pem = client.cert,
                                   .client_key_pem = client.key});
  auto r = t->Do({.path_and_query = "/x"});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(HttpTransportTlsTest, MismatchedOrInvalidClientKeyIsACreateError) {
  Pem a = ca_.IssueClient("a");
  Pem b = ca_.IssueClient("b");
  auto t = HttpTransport::Create(RestConfig{.server = "https://127.0.0.1:1",
                                            .client_cert_pem = a.cert,
                                            .client_key_pem = b.key,
                                            .source = "kubeconfig /k"});
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("kubeconfig /k: client key does not match the client certificate"));
  auto bad = HttpTransport::Create(RestConfig{
      .server = "https://127.0.0.1:1", .client_cert_pem = "junk", .client_key_pem = a.key});
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("client certificate is not valid PEM"));
  auto bad_ca = HttpTransport::Create(RestConfig{.server = "https://127.0.0.1:1", .ca_pem = "x"});
  EXPECT_THAT(std::string(bad_ca.status().message()), HasSubstr("holds no PEM certificate"));
}

}  // namespace
}  // namespace dra::k8s
