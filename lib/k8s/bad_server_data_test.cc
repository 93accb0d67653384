// What the client does with malformed answers from the API server: one bad object or envelope
// costs a warning or that one request's error, never the process. Before the non-throwing JSON
// layer (lib/common/json_access.h), every test here marked "crashed before" ended the test binary
// with an uncaught nlohmann::json::type_error (std::terminate).

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/log.h"
#include "lib/k8s/client.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/reflector.h"
#include "test/support/canned_http_server.h"

namespace dra::k8s {
namespace {

using dra::testing::CannedHttpServer;
using ::testing::HasSubstr;

constexpr char kSlice[] =
    R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice",)"
    R"("metadata":{"name":"s1","resourceVersion":"7"},"spec":{"driver":"d","pool":)"
    R"({"name":"p","generation":1,"resourceSliceCount":1},"nodeName":"n"}})";

std::unique_ptr<Client> ClientFor(const CannedHttpServer& server, ClientOptions options = {}) {
  RestConfig cfg;
  cfg.server = server.url();
  auto c = Client::Create(cfg, std::move(options));
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

// Collects warnings while alive.
class LogCapture {
 public:
  LogCapture() {
    log::SetSink([this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { log::SetSink(nullptr); }
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const std::string& l : lines_) all += l;
    return all;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

std::string Event(absl::string_view type, absl::string_view object) {
  return absl::StrCat(R"({"type":)", type, R"(,"object":)", object, "}\n");
}

// Crashed before: j.value("type", "") threw on a non-string type.
TEST(BadServerDataTest, WatchSkipsEventsWithAMalformedEnvelope) {
  std::string stream = Event("5", kSlice) + Event(R"("ADDED")", R"("not an object")") +
                       Event(R"("SOMETHING")", kSlice) + "[1,2]\n" + Event(R"("ADDED")", kSlice);
  CannedHttpServer server({{200, stream, ""}});
  auto client = ClientFor(server);
  LogCapture logs;
  std::vector<WatchEvent> events;
  absl::Status s = client->Watch(ResourceSlice::kResource, "", {}, [&](WatchEvent&& e) {
    events.push_back(std::move(e));
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::kAdded);
  std::string text = logs.Text();
  EXPECT_THAT(text, HasSubstr("skipping malformed watch event"));
  EXPECT_THAT(text, HasSubstr("type: expected string, got integer"));
  EXPECT_THAT(text, HasSubstr("object: expected object, got string"));
  EXPECT_THAT(text, HasSubstr("unknown watch event type \\\"SOMETHING\\\""));
  EXPECT_THAT(text, HasSubstr("expected object, got array"));
}

// Crashed before: st.value("code", 500) threw on an ERROR event whose object is not an object.
TEST(BadServerDataTest, WatchErrorEventOfAnyShapeEndsTheWatchWithAnError) {
  for (const char* object : {R"("boom")", "5", R"({"code":"x","reason":7})", "null"}) {
    CannedHttpServer server({{200, Event(R"("ERROR")", object), ""}});
    auto client = ClientFor(server);
    absl::Status s =
        client->Watch(ResourceSlice::kResource, "", {}, [](WatchEvent&&) { return true; });
    EXPECT_FALSE(s.ok()) << object;
    EXPECT_THAT(std::string(s.message()), HasSubstr("watch resourceslices.resource.k8s.io"));
  }
}

TEST(BadServerDataTest, WatchLineThatIsNotJsonEndsTheWatchQuotingIt) {
  CannedHttpServer server({{200, "{\"type\":\"ADDED\",\n", ""}});
  auto client = ClientFor(server);
  absl::Status s =
      client->Watch(ResourceSlice::kResource, "", {}, [](WatchEvent&&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "watch resourceslices.resource.k8s.io: watch event: not valid JSON (16 bytes), "
            "starting \"{\\\"type\\\":\\\"ADDED\\\",\"");
}

// Crashed before: meta.value("resourceVersion", "") threw on "metadata": 5.
TEST(BadServerDataTest, ListWithMalformedEnvelopeFailsThatRequest) {
  struct Case {
    const char* body;
    const char* want;
  };
  const Case cases[] = {
      {R"({"metadata":5,"items":[]})", "metadata: expected object, got integer"},
      {R"({"metadata":{"resourceVersion":5},"items":[]})",
       "metadata.resourceVersion: expected string, got integer"},
      {R"({"metadata":{"continue":[]},"items":[]})",
       "metadata.continue: expected string, got array"},
      {R"({"items":{}})", "items: expected array, got object"},
      {R"({"items":[{},"x"]})", "items[1]: expected object, got string"},
      {R"([])", "expected object, got array"},
      {R"("items")", "expected object, got string"},
  };
  for (const Case& c : cases) {
    CannedHttpServer server({{200, c.body, ""}});
    auto client = ClientFor(server);
    absl::StatusOr<nlohmann::json> list = client->ListAll(ResourceSlice::kResource, "");
    ASSERT_FALSE(list.ok()) << c.body;
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(list.status().message(),
              absl::StrCat("list resourceslices.resource.k8s.io: response: ", c.want))
        << c.body;
  }
}

// Crashed before: j.value("kind", "") threw on an error body whose kind is not a string.
TEST(BadServerDataTest, ErrorBodyOfTheWrongShapeStillMapsTheCode) {
  CannedHttpServer server({{404, R"({"kind":5,"reason":[],"details":"x"})", ""}});
  auto client = ClientFor(server);
  auto r = client->Get(ResourceSlice::kResource, "", "s1");
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  absl::Status s = StatusFromHttp(
      500, R"({"kind":"Status","reason":5,"message":{},"details":{"retryAfterSeconds":"1"}})", "",
      "get x");
  EXPECT_EQ(s.code(), StatusFromHttp(500, "", "", "get x").code());
  EXPECT_EQ(Reason(s), "InternalError");
  EXPECT_EQ(RetryAfter(s), absl::ZeroDuration());
}

// Crashed before: the reflector's list read threw on "metadata": 5, and ResourceVersionOf threw
// on an event whose metadata.resourceVersion is a number.
TEST(BadServerDataTest, ReflectorRetriesAMalformedListAndPassesMalformedObjectsOn) {
  std::string good_list = absl::StrCat(R"({"metadata":{"resourceVersion":"5"},"items":[)", kSlice,
                                       R"(,{"metadata":5}]})");
  std::string stream = Event(R"("MODIFIED")", R"({"metadata":{"name":"s1","resourceVersion":9}})") +
                       Event(R"("MODIFIED")", kSlice);
  CannedHttpServer server(
      {{200, R"({"metadata":5,"items":[]})", ""}, {200, good_list, ""}, {200, stream, ""}});
  auto client = ClientFor(server);
  LogCapture logs;
  std::atomic<int> replaced{0}, items{0}, events{0};
  Reflector reflector(client.get(), ResourceSlice::kResource, "", {},
                      Reflector::Sink{[&](std::vector<nlohmann::json>&& list) {
                                        items = static_cast<int>(list.size());
                                        ++replaced;
                                      },
                                      [&](WatchEvent&&) { ++events; }});
  std::thread t([&] { reflector.Run(); });
  for (int i = 0; i < 500 && events.load() < 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  reflector.Stop();
  t.join();
  EXPECT_EQ(replaced.load(), 1);
  EXPECT_EQ(items.load(), 2);  // the typed informer skips {"metadata":5} with a warning
  EXPECT_GE(events.load(), 2);
  EXPECT_THAT(logs.Text(), HasSubstr("metadata: expected object, got integer"));
}

TEST(BadServerDataTest, ResponseBodyOverTheCapFailsNamingTheLimitAndTheUrl) {
  std::string big = absl::StrCat(R"({"items":[],"pad":")", std::string(4096, 'x'), "\"}");
  CannedHttpServer server({{200, big, ""}});
  auto client = ClientFor(server, {.max_body_bytes = 1024});
  auto list = client->List(ResourceSlice::kResource, "");
  EXPECT_EQ(list.status().code(), absl::StatusCode::kResourceExhausted) << list.status();
  EXPECT_THAT(std::string(list.status().message()),
              HasSubstr(absl::StrCat("GET ", server.url(),
                                     "/apis/resource.k8s.io/v1/resourceslices: response body "
                                     "larger than the 1024 bytes limit")));
  // The default cap is declared and generous.
  EXPECT_EQ(ClientOptions{}.max_body_bytes, size_t{64} << 20);
}

TEST(BadServerDataTest, WatchLineOverTheCapEndsTheWatchNamingTheLimitAndTheUrl) {
  std::string stream = Event(R"("ADDED")", kSlice) + std::string(4096, ' ') + "\n";
  CannedHttpServer server({{200, stream, ""}});
  auto client = ClientFor(server, {.max_watch_line_bytes = 1024});
  int events = 0;
  absl::Status s = client->Watch(ResourceSlice::kResource, "", {}, [&](WatchEvent&&) {
    ++events;
    return true;
  });
  EXPECT_EQ(events, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("watch resourceslices.resource.k8s.io: GET ", server.url(),
                                     "/apis/resource.k8s.io/v1/resourceslices?watch=true")));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("watch event line longer than the 1024 bytes limit"));
  EXPECT_EQ(ClientOptions{}.max_watch_line_bytes, size_t{16} << 20);
}

}  // namespace
}  // namespace dra::k8s
