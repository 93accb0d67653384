#include "lib/kubeletplugin/claim_cache.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/wire_decode.h"
#include "lib/kubeletplugin/claim_source.h"
#include "test/support/canned_http_server.h"

namespace dra::kubeletplugin {
namespace {

using ::testing::IsNull;
using ::testing::NotNull;

// A ResourceClaim in the API server's JSON: allocated (to `pool` by `driver`) when `pool` is not
// empty, reserved for a pod when `reserved`.
nlohmann::json Claim(const std::string& name, const std::string& uid, const std::string& rv,
                     const std::string& pool = "node-a", bool reserved = true,
                     const std::string& driver = "gpu.nvidia.com") {
  nlohmann::json c = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", uid}, {"resourceVersion", rv}}},
      {"spec", {{"devices", {{"requests", nlohmann::json::array()}}}}},
      {"status", nlohmann::json::object()}};
  if (!pool.empty()) {
    c["status"]["allocation"] = {
        {"devices",
         {{"results",
           {{{"request", "gpu"}, {"driver", driver}, {"pool", pool}, {"device", "gpu-0"}}}}}}};
  }
  if (reserved) {
    c["status"]["reservedFor"] = {{{"resource", "pods"}, {"name", "p"}, {"uid", "pod-uid"}}};
  }
  return c;
}

ClaimRef Ref(const std::string& name, const std::string& uid) {
  return {.namespace_name = "ns", .name = name, .uid = uid};
}

class ClaimCacheTest : public ::testing::Test {
 protected:
  ClaimCacheTest()
      : cache_({.driver_name = "gpu.nvidia.com",
                .node_name = "node-a",
                .on_lookup = [this](ClaimCache::Result r) {
                  results_.push_back(ClaimCache::ResultName(r));
                }}) {}

  void List(const std::vector<nlohmann::json>& claims) {
    cache_.BeginRelist();
    cache_.AddPage(claims);
    cache_.EndRelist();
  }
  void Event(k8s::WatchEvent::Type type, nlohmann::json object) {
    cache_.Apply(k8s::WatchEvent{.type = type, .object = std::move(object)});
  }

  std::vector<std::string> results_;
  ClaimCache cache_;
};

TEST_F(ClaimCacheTest, KeepsOnlyReservedClaimsAllocatedByThisDriverOnThisNode) {
  List({Claim("mine", "u1", "1"), Claim("other-node", "u2", "2", "node-b"),
        Claim("other-driver", "u3", "3", "node-a", true, "other.example.com"),
        Claim("unallocated", "u4", "4", ""), Claim("unreserved", "u5", "5", "node-a", false)});
  EXPECT_EQ(cache_.size(), 1u);
  EXPECT_THAT(cache_.Find(Ref("mine", "u1")), NotNull());
  EXPECT_THAT(cache_.Find(Ref("other-node", "u2")), IsNull());
  EXPECT_THAT(cache_.Find(Ref("unreserved", "u5")), IsNull());
  EXPECT_THAT(results_, ::testing::ElementsAre("hit", "miss", "miss"));
}

TEST_F(ClaimCacheTest, AnotherUidIsStaleAndCounted) {
  List({Claim("c", "old-uid", "1")});
  EXPECT_THAT(cache_.Find(Ref("c", "new-uid")), IsNull());
  EXPECT_THAT(cache_.Find(Ref("c", "old-uid")), NotNull());
  EXPECT_THAT(cache_.Find(Ref("gone", "x")), IsNull());
  const ClaimCache::Counts n = cache_.counts();
  EXPECT_EQ(n.hits, 1);
  EXPECT_EQ(n.stale, 1);
  EXPECT_EQ(n.misses, 1);
}

TEST_F(ClaimCacheTest, WatchEventsAddUpdateAndDelete) {
  List({});
  Event(k8s::WatchEvent::Type::kAdded, Claim("c", "u1", "5", "", false));  // not allocated yet
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), IsNull());
  Event(k8s::WatchEvent::Type::kModified, Claim("c", "u1", "6"));  // allocated and reserved
  auto found = cache_.Find(Ref("c", "u1"));
  ASSERT_THAT(found, NotNull());
  EXPECT_EQ(found->status.allocation->devices.results.at(0).device, "gpu-0");
  Event(k8s::WatchEvent::Type::kModified, Claim("c", "u1", "7", "node-a", false));  // released
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), IsNull());
  Event(k8s::WatchEvent::Type::kModified, Claim("c", "u1", "8"));
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), NotNull());
  Event(k8s::WatchEvent::Type::kDeleted, Claim("c", "u1", "9"));
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), IsNull());
  EXPECT_EQ(cache_.size(), 0u);
}

TEST_F(ClaimCacheTest, AfterUnprepareTheSameVersionNeverAnswersAgainButANewerOneDoes) {
  List({Claim("c", "u1", "10")});
  cache_.Unprepared(Ref("c", "u1"));
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), IsNull());
  // A relist (or a repeated event) of the version the unprepare dropped is not taken again.
  List({Claim("c", "u1", "10")});
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), IsNull());
  // The claim allocated again (same UID, newer version).
  Event(k8s::WatchEvent::Type::kModified, Claim("c", "u1", "12"));
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), NotNull());
}

TEST_F(ClaimCacheTest, UnprepareOfAnotherUidKeepsTheCopy) {
  List({Claim("c", "u1", "10")});
  cache_.Unprepared(Ref("c", "u-other"));
  EXPECT_THAT(cache_.Find(Ref("c", "u1")), NotNull());
}

TEST_F(ClaimCacheTest, RelistReplacesTheCopies) {
  List({Claim("a", "ua", "1"), Claim("b", "ub", "2")});
  List({Claim("b", "ub", "3")});
  EXPECT_THAT(cache_.Find(Ref("a", "ua")), IsNull());
  EXPECT_THAT(cache_.Find(Ref("b", "ub")), NotNull());
}

TEST_F(ClaimCacheTest, FetchTakesHitsFromTheCacheAndGetsTheRest) {
  List({Claim("cached", "u1", "1"), Claim("replaced", "old", "2")});
  std::vector<std::string> gets;
  ClaimGetter getter = [&](const std::string& ns,
                           const std::string& name) -> absl::StatusOr<k8s::ResourceClaim> {
    gets.push_back(ns + "/" + name);
    return k8s::ResourceClaim::FromJson(Claim(name, name == "replaced" ? "new" : "u3", "20"));
  };
  auto claims = FetchClaimsForPrepare(
      getter, {Ref("cached", "u1"), Ref("replaced", "new"), Ref("unknown", "u3")}, &cache_);
  ASSERT_TRUE(claims.ok()) << claims.status();
  ASSERT_EQ(claims->size(), 3u);
  EXPECT_EQ((*claims)[0].metadata.uid, "u1");
  EXPECT_EQ((*claims)[1].metadata.uid, "new");
  EXPECT_EQ((*claims)[2].metadata.uid, "u3");
  EXPECT_THAT(gets, ::testing::ElementsAre("ns/replaced", "ns/unknown"));
}

TEST_F(ClaimCacheTest, FetchStillChecksWhatTheGetterReturns) {
  List({});
  ClaimGetter getter = [&](const std::string&,
                           const std::string& name) -> absl::StatusOr<k8s::ResourceClaim> {
    return k8s::ResourceClaim::FromJson(Claim(name, "u1", "1", ""));
  };
  auto claims = FetchClaimsForPrepare(getter, {Ref("c", "u1")}, &cache_);
  EXPECT_EQ(claims.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(claims.status().message(), "claim ns/c not allocated");
}

// ---- Against a fake API server: claims nested deeper than the client reads ----
// The API server accepts opaque parameters nested up to its own limit (about 10,000 levels). One
// such claim, anywhere in the cluster, used to fail every relist and end the watch on the same
// event at every resume, on every node.

std::string Nested(int levels) {
  std::string out;
  for (int i = 0; i < levels; ++i) out += R"({"a":)";
  return out + "1" + std::string(levels, '}');
}

// Claim(...) as text, with opaque parameters nested 10,000 levels deep.
std::string DeepClaim(const std::string& name, const std::string& uid, const std::string& rv) {
  nlohmann::json c = Claim(name, uid, rv);
  c["spec"]["devices"]["config"] = {
      {{"opaque", {{"driver", "gpu.nvidia.com"}, {"parameters", "DEEP"}}}}};
  std::string text = c.dump();
  text.replace(text.find("\"DEEP\""), 6, Nested(10000));
  return text;
}

std::string EventLine(const std::string& type, const std::string& object) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", object, "}\n");
}

TEST(ClaimCacheServerTest, ADeepClaimStallsNeitherTheListNorTheWatch) {
  std::string page =
      absl::StrCat(R"({"metadata":{"resourceVersion":"5"},"items":[)", Claim("a", "ua", "1").dump(),
                   ",", DeepClaim("b", "ub", "2"), ",", Claim("c", "uc", "3").dump(), "]}");
  std::string stream = EventLine("MODIFIED", DeepClaim("a", "ua", "6")) +
                       EventLine("ADDED", Claim("d", "ud", "7").dump());
  dra::testing::CannedHttpServer server({{200, page, ""}, {200, stream, ""}, {200, "", ""}});
  k8s::RestConfig config;
  config.server = server.url();
  auto client = k8s::Client::Create(config);
  ASSERT_TRUE(client.ok()) << client.status();
  const int64_t before = k8s::UndecodableCount("resourceclaims.resource.k8s.io");
  ClaimCache cache({.driver_name = "gpu.nvidia.com", .node_name = "node-a"});
  cache.Start(client->get());
  ASSERT_TRUE(cache.WaitForSync(absl::Seconds(20)));
  // Requests: the list, the watch that delivers both events, the watch resumed after them.
  for (int i = 0; i < 2000 && server.requests().size() < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GE(server.requests().size(), 3u);
  EXPECT_THAT(server.requests()[2].first, ::testing::HasSubstr("resourceVersion=7"));
  EXPECT_THAT(cache.Find(Ref("c", "uc")), NotNull());
  EXPECT_THAT(cache.Find(Ref("d", "ud")), NotNull());
  EXPECT_THAT(cache.Find(Ref("b", "ub")), IsNull());
  // Its newer version cannot be read: the copy is dropped, prepare GETs it.
  EXPECT_THAT(cache.Find(Ref("a", "ua")), IsNull());
  cache.Stop();
  EXPECT_EQ(k8s::UndecodableCount("resourceclaims.resource.k8s.io"), before + 2);
}

}  // namespace
}  // namespace dra::kubeletplugin
