// What the client does with malformed answers from the API server: one bad object or envelope
// costs a warning or that one request's error, never the process. Before the non-throwing JSON
// layer (lib/common/json_access.h), every test here marked "crashed before" ended the test binary
// with an uncaught nlohmann::json::type_error (std::terminate).

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"
#include "lib/k8s/client.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/reflector.h"
#include "lib/k8s/wire_decode.h"
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

using ::dra::log::LogCapture;

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

// ---- Objects nested deeper than the client reads (json_access::kMaxDepth, 512) ----
// The API server stores them (it accepts up to about 10,000 levels, e.g. in a claim's opaque
// parameters). Before: such an object failed its whole list page, or ended the watch on the same
// line every time it resumed, so the list or watch never got past it.

// `{"a":{"a":...}}`, `levels` deep.
std::string Nested(int levels) {
  std::string out;
  for (int i = 0; i < levels; ++i) out += R"({"a":)";
  return out + "1" + std::string(levels, '}');
}

// A ResourceClaim in namespace "ns" whose opaque parameters are `parameters`.
std::string Claim(absl::string_view name, absl::string_view rv,
                  absl::string_view parameters = "{}") {
  return absl::StrCat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":")", name,
      R"(","namespace":"ns","uid":"uid-)", name, R"(","resourceVersion":")", rv,
      R"("},"spec":{"devices":{"config":[{"opaque":{"driver":"gpu.nvidia.com","parameters":)",
      parameters, "}}]}}}");
}
std::string DeepClaim(absl::string_view name, absl::string_view rv) {
  return Claim(name, rv, Nested(10000));
}

std::string Page(absl::string_view rv, const std::vector<std::string>& items,
                 absl::string_view cont = "") {
  return absl::StrCat(R"({"kind":"ResourceClaimList","metadata":{"resourceVersion":")", rv,
                      R"(","continue":")", cont, R"("},"items":[)", absl::StrJoin(items, ","),
                      "]}");
}

std::vector<std::string> Names(const std::vector<nlohmann::json>& items) {
  std::vector<std::string> out;
  for (const nlohmann::json& i : items) out.push_back(i["metadata"]["name"].get<std::string>());
  return out;
}

// The query of the request line of request `i` of `server`.
std::string RequestLine(CannedHttpServer& server, size_t i) {
  std::vector<std::pair<std::string, absl::Time>> r = server.requests();
  return i < r.size() ? r[i].first : "";
}

TEST(DeepObjectTest, WatchDeliversTheEventsAroundADeepObjectAndEndsNormally) {
  std::string stream = Event(R"("ADDED")", Claim("a", "6")) +
                       Event(R"("MODIFIED")", DeepClaim("b", "7")) +
                       Event(R"("ADDED")", Claim("c", "8"));
  CannedHttpServer server({{200, stream, ""}});
  auto client = ClientFor(server);
  std::vector<WatchEvent> events;
  absl::Status s = client->Watch(ResourceClaim::kResource, "", {}, [&](WatchEvent&& e) {
    events.push_back(std::move(e));
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].object["metadata"]["name"], "c");
  // The deep one: its identity only, marked, so that nobody decodes it as a claim.
  EXPECT_EQ(events[1].type, WatchEvent::Type::kModified);
  ASSERT_TRUE(events[1].undecodable.has_value());
  EXPECT_EQ(events[1].undecodable->name, "b");
  EXPECT_EQ(events[1].undecodable->namespace_name, "ns");
  EXPECT_EQ(events[1].undecodable->uid, "uid-b");
  EXPECT_EQ(events[1].undecodable->resource_version, "7");
  EXPECT_EQ(events[1].undecodable->reason, "nested deeper than 512 levels");
  EXPECT_EQ(events[1].object,
            nlohmann::json::parse(R"({"metadata":{"name":"b","namespace":"ns","uid":"uid-b",)"
                                  R"("resourceVersion":"7"}})"));
  EXPECT_FALSE(events[0].undecodable.has_value());
  EXPECT_FALSE(events[2].undecodable.has_value());
}

TEST(DeepObjectTest, PagedListYieldsTheOtherItemsAndNamesTheDeepOne) {
  CannedHttpServer server(
      {{200, Page("5", {Claim("a", "1"), DeepClaim("b", "2"), Claim("c", "3")}, "next"), ""},
       {200, Page("5", {DeepClaim("d", "4"), Claim("e", "5")}), ""}});
  auto client = ClientFor(server);
  absl::StatusOr<ListPage> all = client->ListAllOf(ResourceClaim::kResource, "", {.limit = 3});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(Names(all->items), ::testing::ElementsAre("a", "c", "e"));
  ASSERT_EQ(all->undecodable.size(), 2u);
  EXPECT_EQ(all->undecodable[0].name, "b");
  EXPECT_EQ(all->undecodable[1].name, "d");
  EXPECT_EQ(all->resource_version, "5");
  EXPECT_THAT(RequestLine(server, 1), HasSubstr("continue=next"));
}

TEST(DeepObjectTest, ListAllLeavesTheDeepItemOutAndCountsItOnce) {
  const int64_t before = UndecodableCount("resourceclaims.resource.k8s.io");
  CannedHttpServer server(
      {{200, Page("5", {Claim("a", "1"), DeepClaim("list-once", "2"), Claim("c", "3")}), ""}});
  auto client = ClientFor(server);
  LogCapture logs;
  for (int i = 0; i < 3; ++i) {  // the same version met again is neither logged nor counted again
    absl::StatusOr<nlohmann::json> list = client->ListAll(ResourceClaim::kResource, "");
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_EQ(list->at("items").size(), 2u);
    EXPECT_EQ(list->at("metadata").at("resourceVersion"), "5");
  }
  EXPECT_EQ(UndecodableCount("resourceclaims.resource.k8s.io"), before + 1);
  std::string text = logs.Text();
  EXPECT_THAT(text, HasSubstr("ns/list-once"));
  EXPECT_EQ(text.find("ns/list-once"), text.rfind("ns/list-once")) << text;
}

TEST(DeepObjectTest, ReflectorWatchGoesPastADeepEventAndResumesAfterIt) {
  std::string stream =
      Event(R"("MODIFIED")", DeepClaim("b", "7")) + Event(R"("ADDED")", Claim("c", "8"));
  CannedHttpServer server(
      {{200, Page("5", {Claim("a", "1")}), ""}, {200, stream, ""}, {200, "", ""}});
  auto client = ClientFor(server);
  absl::Mutex mu;
  std::vector<std::string> seen;  // names of the events passed on
  Reflector reflector(
      client.get(), ResourceClaim::kResource, "", {},
      Reflector::Sink{[](std::vector<nlohmann::json>&&) {},
                      [&](WatchEvent&& e) {
                        absl::MutexLock l(&mu);
                        seen.push_back(e.object["metadata"]["name"].get<std::string>());
                      }});
  std::thread t([&] { reflector.Run(); });
  auto resumed = [&] { return server.requests().size() >= 3; };
  for (int i = 0; i < 1000 && !resumed(); ++i) absl::SleepFor(absl::Milliseconds(10));
  reflector.Stop();
  t.join();
  absl::MutexLock l(&mu);
  EXPECT_THAT(seen, ::testing::Contains("c"));
  // The next watch resumes after both events, not at the deep one.
  EXPECT_THAT(RequestLine(server, 2), HasSubstr("resourceVersion=8"));
}

TEST(DeepObjectTest, ReflectorListsPastADeepItem) {
  CannedHttpServer server(
      {{200, Page("5", {Claim("a", "1"), DeepClaim("b", "2"), Claim("c", "3")}), ""},
       {200, "", ""}});
  auto client = ClientFor(server);
  absl::Notification listed;
  std::vector<std::string> names;
  Reflector reflector(client.get(), ResourceClaim::kResource, "", {},
                      Reflector::Sink{[&](std::vector<nlohmann::json>&& items) {
                                        if (listed.HasBeenNotified()) return;
                                        names = Names(items);
                                        listed.Notify();
                                      },
                                      [](WatchEvent&&) {}});
  std::thread t([&] { reflector.Run(); });
  EXPECT_TRUE(listed.WaitForNotificationWithTimeout(absl::Seconds(20)));
  reflector.Stop();
  t.join();
  EXPECT_THAT(names, ::testing::ElementsAre("a", "c"));
  EXPECT_EQ(reflector.lists(), 1);
}

// The informer's contract for an object it cannot decode (informer.h): the cache keeps the last
// version it could decode, the object's deletion is still applied, the others stay current.
TEST(DeepObjectTest, InformerSyncsServesTheOthersAndKeepsTheLastGoodVersion) {
  const int64_t before = UndecodableCount("resourceclaims.resource.k8s.io");
  std::string stream = Event(R"("MODIFIED")", DeepClaim("inf-a", "6")) +
                       Event(R"("ADDED")", Claim("inf-d", "7")) +
                       Event(R"("DELETED")", DeepClaim("inf-a", "8"));
  CannedHttpServer server(
      {{200, Page("5", {Claim("inf-a", "1"), DeepClaim("inf-b", "2"), Claim("inf-c", "3")}), ""},
       {200, stream, ""},
       {200, "", ""}});
  auto client = ClientFor(server);
  Informer<ResourceClaim> informer(client.get());
  absl::Notification added_d, deleted_a;
  std::string a_version_when_d_came;
  informer.AddHandlers({.on_add =
                            [&](const Informer<ResourceClaim>::Ptr& c) {
                              if (c->metadata.name != "inf-d") return;
                              auto a = informer.Get("ns/inf-a");
                              a_version_when_d_came = a ? a->metadata.resource_version : "gone";
                              added_d.Notify();
                            },
                        .on_delete =
                            [&](const Informer<ResourceClaim>::Ptr& c) {
                              if (c->metadata.name == "inf-a") deleted_a.Notify();
                            }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(20)));
  ASSERT_TRUE(added_d.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_TRUE(deleted_a.WaitForNotificationWithTimeout(absl::Seconds(20)));
  informer.Stop();
  EXPECT_EQ(a_version_when_d_came, "1");
  EXPECT_EQ(informer.Get("ns/inf-a"), nullptr);
  EXPECT_EQ(informer.Get("ns/inf-b"), nullptr);
  EXPECT_NE(informer.Get("ns/inf-c"), nullptr);
  EXPECT_NE(informer.Get("ns/inf-d"), nullptr);
  // inf-b@2 and inf-a@6 were skipped; a deletion is not a skip.
  EXPECT_EQ(UndecodableCount("resourceclaims.resource.k8s.io"), before + 2);
}

// Before: the exception left the informer's thread, and std::terminate ended the process.
TEST(DeepObjectTest, AHandlerThatThrowsLosesOneEventNotTheInformer) {
  CannedHttpServer server({{200, Page("5", {Claim("a", "1"), Claim("b", "2")}), ""},
                           {200, Event(R"("ADDED")", Claim("c", "6")), ""},
                           {200, "", ""}});
  auto client = ClientFor(server);
  Informer<ResourceClaim> informer(client.get());
  absl::Mutex mu;
  std::vector<std::string> added;
  absl::Notification added_c;
  informer.AddHandlers({.on_add = [&](const Informer<ResourceClaim>::Ptr& c) {
    if (c->metadata.name == "a") throw std::runtime_error("type must be string, but is number");
    absl::MutexLock l(&mu);
    added.push_back(c->metadata.name);
    if (c->metadata.name == "c") added_c.Notify();
  }});
  LogCapture logs;
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(20)));
  ASSERT_TRUE(added_c.WaitForNotificationWithTimeout(absl::Seconds(20)));
  informer.Stop();
  absl::MutexLock l(&mu);
  EXPECT_THAT(added, ::testing::ElementsAre("b", "c"));
  EXPECT_EQ(informer.handler_exceptions(), 1);
  EXPECT_NE(informer.Get("ns/a"), nullptr);  // the cache holds it; only the handler call failed
  EXPECT_THAT(logs.Text(), HasSubstr("type must be string, but is number"));
}

}  // namespace
}  // namespace dra::k8s
