// Dead connections are noticed: TCP keepalive on every API connection, and an idle limit on
// streams, so that a watch whose connection died without a close (a silent network failure) ends
// and is resumed instead of leaving its informer stale. Each server here answers and then stays
// silent without closing, which is what such a failure looks like from the client; the tests
// bound their own waits, so a client that blocks forever fails them instead of hanging.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"
#include "lib/k8s/client.h"
#include "lib/k8s/http.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/reflector.h"
#include "lib/k8s/test_http_server.h"
#include "lib/k8s/tls_connection.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using testing::ServerConn;
using testing::TestHttpServer;

// How long a test waits for what it expects before it fails: far beyond every idle limit used
// here, so only a client that never notices the silence runs into it.
constexpr absl::Duration kTestDeadline = absl::Seconds(20);

constexpr char kStreamHead[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string Chunk(absl::string_view data) {
  return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
}

std::string SliceEvent(absl::string_view type, absl::string_view name, absl::string_view rv) {
  return absl::StrCat(R"({"type":")", type, R"(","object":{"apiVersion":"resource.k8s.io/v1",)",
                      R"("kind":"ResourceSlice","metadata":{"name":")", name,
                      R"(","resourceVersion":")", rv, R"("}}})", "\n");
}

using ::dra::log::LogCapture;

int IntOption(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  EXPECT_EQ(::getsockopt(fd, level, name, &value, &len), 0) << "option " << name;
  return value;
}

TEST(DeadConnectionTest, EveryConnectionHasTcpKeepaliveAndAUserTimeout) {
  TestHttpServer server([](ServerConn& c) { c.WaitForClose(); });
  auto endpoint = ParseServerUrl(server.url());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  auto conn = Connection::Open(*endpoint, nullptr, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(conn.ok()) << conn.status();
  const int fd = (*conn)->fd();
  EXPECT_EQ(IntOption(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(IntOption(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
  EXPECT_EQ(IntOption(fd, IPPROTO_TCP, TCP_KEEPINTVL), 10);
  EXPECT_EQ(IntOption(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
  EXPECT_EQ(IntOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 60000);  // milliseconds
  EXPECT_EQ(IntOption(fd, IPPROTO_TCP, TCP_NODELAY), 1);
}

// The transport's part: a stream that goes silent without closing ends after its idle limit.
TEST(DeadConnectionTest, SilentStreamEndsAfterItsIdleLimit) {
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    c.Write(kStreamHead);
    c.Write(Chunk("first\n"));
    c.WaitForClose();  // silent, open
  });
  auto t = HttpTransport::Create({.server = server.url()});
  ASSERT_TRUE(t.ok()) << t.status();
  std::string got;
  const absl::Time start = absl::Now();
  auto r = (*t)->Stream(
      {.path_and_query = "/watch",
       .timeout = absl::InfiniteDuration(),
       .idle_timeout = absl::Milliseconds(300)},
      [&](absl::string_view chunk) {
        got.append(chunk.data(), chunk.size());
        return true;
      },
      [&] { return absl::Now() - start > kTestDeadline; });
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(got, "first\n");
  ASSERT_FALSE(r.ok()) << "the stream sat silent until the test's own deadline";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_TRUE(IsIdleTimeout(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr(absl::StrCat("GET ", server.url(), "/watch: nothing received for 300ms")));
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, kTestDeadline);
}

// The wait for the response head counts too: a server that never answers is as dead.
TEST(DeadConnectionTest, IdleLimitAlsoBoundsTheWaitForTheResponse) {
  TestHttpServer server([](ServerConn& c) { c.WaitForClose(); });
  auto t = HttpTransport::Create({.server = server.url()});
  ASSERT_TRUE(t.ok()) << t.status();
  const absl::Time start = absl::Now();
  auto r = (*t)->Stream(
      {.path_and_query = "/watch",
       .timeout = absl::InfiniteDuration(),
       .idle_timeout = absl::Milliseconds(300)},
      [](absl::string_view) { return true; }, [&] { return absl::Now() - start > kTestDeadline; });
  ASSERT_FALSE(r.ok()) << "the stream sat silent until the test's own deadline";
  EXPECT_TRUE(IsIdleTimeout(r.status())) << r.status();
  EXPECT_LT(absl::Now() - start, kTestDeadline);
}

// Any byte restarts the idle clock: a stream whose gaps all stay under the limit runs on for
// longer than the limit, to its end.
TEST(DeadConnectionTest, StreamWithGapsUnderTheLimitIsNotEnded) {
  constexpr int kChunks = 12;
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    c.Write(kStreamHead);
    for (int i = 0; i < kChunks; ++i) {
      absl::SleepFor(absl::Milliseconds(100));  // the server's pace, not a wait for an event
      c.Write(Chunk("x"));
    }
    c.Write("0\r\n\r\n");
  });
  auto t = HttpTransport::Create({.server = server.url()});
  ASSERT_TRUE(t.ok()) << t.status();
  std::string got;
  auto r = (*t)->Stream(
      {.path_and_query = "/watch",
       .timeout = absl::InfiniteDuration(),
       .idle_timeout = absl::Seconds(1)},
      [&](absl::string_view chunk) {
        got.append(chunk.data(), chunk.size());
        return true;
      },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(got, std::string(kChunks, 'x'));
}

// A watch kept alive by bookmarks alone, quiet for longer than its idle limit, is not ended.
TEST(DeadConnectionTest, BookmarksKeepAQuietWatchOpen) {
  constexpr int kBookmarks = 12;
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    c.Write(kStreamHead);
    for (int i = 0; i < kBookmarks; ++i) {
      absl::SleepFor(absl::Milliseconds(100));  // the server's bookmark period, scaled down
      c.Write(Chunk(SliceEvent("BOOKMARK", "", absl::StrCat(10 + i))));
    }
    c.Write("0\r\n\r\n");
  });
  auto client = Client::Create({.server = server.url()}, {.watch_idle_timeout = absl::Seconds(1)});
  ASSERT_TRUE(client.ok()) << client.status();
  int bookmarks = 0;
  absl::Status s = (*client)->Watch(ResourceSlice::kResource, "", {}, [&](WatchEvent&& e) {
    if (e.type == WatchEvent::Type::kBookmark) ++bookmarks;
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(bookmarks, kBookmarks);
}

// Requests other than watches keep their whole-request timeout: a slow answer, later than the
// watch idle limit, is still waited for.
TEST(DeadConnectionTest, WatchIdleLimitDoesNotApplyToOtherRequests) {
  TestHttpServer server([](ServerConn& c) {
    std::string head;
    if (!c.ReadRequest(&head)) return;
    absl::SleepFor(absl::Milliseconds(600));  // a slow server, three times the idle limit
    c.Write(TestHttpServer::Response(200, R"({"metadata":{"resourceVersion":"1"},"items":[]})"));
    c.WaitForClose();
  });
  auto client =
      Client::Create({.server = server.url()}, {.watch_idle_timeout = absl::Milliseconds(200)});
  ASSERT_TRUE(client.ok()) << client.status();
  auto list = (*client)->List(ResourceSlice::kResource, "");
  EXPECT_TRUE(list.ok()) << list.status();
}

// The whole path: the informer's watch gets one event, then its connection goes silent without a
// close. The watch ends within the idle limit (with a warning and a count), and the reflector
// re-watches from the event's resourceVersion and sees the next event.
TEST(DeadConnectionTest, ReflectorRewatchesFromTheLastVersionAfterASilentConnection) {
  std::mutex mu;
  std::vector<std::string> watch_paths;
  TestHttpServer server([&](ServerConn& c) {
    std::string head;
    while (c.ReadRequest(&head)) {
      std::string line = head.substr(0, head.find("\r\n"));
      if (!absl::StrContains(line, "watch=true")) {
        c.Write(
            TestHttpServer::Response(200, R"({"metadata":{"resourceVersion":"5"},"items":[]})"));
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        watch_paths.push_back(line);
      }
      c.Write(kStreamHead);
      if (absl::StrContains(line, "resourceVersion=5")) {
        c.Write(Chunk(SliceEvent("ADDED", "s1", "6")));
      } else {
        c.Write(Chunk(SliceEvent("ADDED", "s2", "7")));
      }
      c.WaitForClose();  // both watches go silent without a close
      return;
    }
  });
  auto client =
      Client::Create({.server = server.url()}, {.watch_idle_timeout = absl::Milliseconds(300)});
  ASSERT_TRUE(client.ok()) << client.status();
  LogCapture logs;
  std::mutex events_mu;
  std::vector<std::string> names;
  absl::Notification second;
  Reflector reflector(
      client->get(), ResourceSlice::kResource, "", {},
      Reflector::Sink{[](std::vector<nlohmann::json>&&) {},
                      [&](WatchEvent&& e) {
                        std::lock_guard<std::mutex> lock(events_mu);
                        names.push_back(e.object["metadata"]["name"].get<std::string>());
                        if (names.size() == 2) second.Notify();
                      }});
  std::thread run([&] { reflector.Run(); });
  const bool seen = second.WaitForNotificationWithTimeout(kTestDeadline);
  reflector.Stop();
  run.join();
  ASSERT_TRUE(seen) << "the watch sat on the silent connection until the test's own deadline";
  {
    std::lock_guard<std::mutex> lock(events_mu);
    EXPECT_THAT(names, ::testing::ElementsAre("s1", "s2"));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_GE(watch_paths.size(), 2u);
    EXPECT_THAT(watch_paths[0], HasSubstr("resourceVersion=5"));
    EXPECT_THAT(watch_paths[1], HasSubstr("resourceVersion=6"));
    EXPECT_THAT(watch_paths[0], HasSubstr("allowWatchBookmarks=true"));
  }
  EXPECT_EQ(reflector.lists(), 1);  // resumed, not relisted
  EXPECT_GE(reflector.idle_timeouts(), 1);
  EXPECT_THAT(logs.Text(), HasSubstr("watch received nothing for the idle limit"));
  EXPECT_THAT(logs.Text(), HasSubstr("watch resourceslices.resource.k8s.io"));
}

}  // namespace
}  // namespace dra::k8s
