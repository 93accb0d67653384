// Exercises the REST client against the real local kube-apiserver (hack/cluster/up.sh).

#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/client.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_resource.h"
#include "test/support/cluster_env.h"
#include "test/support/etcd_admin.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;

const ResourceInfo& Slices() { return ResourceSlice::kResource; }
const ResourceInfo& Claims() { return ResourceClaim::kResource; }

std::string Unique(absl::string_view prefix) {
  static int counter = 0;
  return absl::StrCat(prefix, "-", ::getpid(), "-", ++counter, "-",
                      absl::ToUnixMicros(absl::Now()) % 1000000);
}

nlohmann::json SliceJson(const std::string& name, const std::string& driver,
                         const std::string& run) {
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata", {{"name", name}, {"labels", {{"test-run", run}}}}},
      {"spec",
       {{"driver", driver},
        {"nodeName", "node-" + run},
        {"pool", {{"name", "pool-" + run}, {"generation", 1}, {"resourceSliceCount", 1}}},
        {"devices",
         {{{"name", "gpu-0"},
           {"attributes", {{"index", {{"int", 0}}}, {"productName", {{"string", "Mock H100"}}}}},
           {"capacity", {{"memory", {{"value", "80Gi"}}}}}}}}}}};
}

class ClientIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.status() << " (start the cluster with hack/cluster/up.sh)";
    auto c = Client::Create(*cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    run_ = Unique("run");
  }
  void TearDown() override {
    if (!client_) return;
    auto list = client_->ListAll(Slices(), "", {.label_selector = "test-run=" + run_});
    if (list.ok()) {
      for (const auto& item : (*list)["items"]) {
        (void)client_->Delete(Slices(), "", item["metadata"]["name"].get<std::string>());
      }
    }
  }
  std::unique_ptr<Client> client_;
  std::string run_;
};

TEST_F(ClientIntegrationTest, ReadyzAndResourceApiServed) {
  auto readyz = client_->GetRaw("/readyz");
  ASSERT_TRUE(readyz.ok()) << readyz.status();
  EXPECT_EQ(*readyz, "ok");
  auto discovery = client_->GetRaw("/apis/resource.k8s.io/v1");
  ASSERT_TRUE(discovery.ok()) << discovery.status();
  EXPECT_THAT(*discovery, HasSubstr("\"resourceslices\""));
  EXPECT_THAT(*discovery, HasSubstr("\"resourceclaims\""));
}

TEST_F(ClientIntegrationTest, ResourceSliceCrudWithSelectorsPatchApplyAndPreconditions) {
  std::string name = Unique("slice");
  std::string driver = "gpu.test.example.com";
  auto created = client_->Create(Slices(), "", SliceJson(name, driver, run_));
  ASSERT_TRUE(created.ok()) << created.status();
  std::string uid = (*created)["metadata"]["uid"];
  EXPECT_FALSE(uid.empty());

  auto again = client_->Create(Slices(), "", SliceJson(name, driver, run_));
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);

  auto got = client_->Get(Slices(), "", name);
  ASSERT_TRUE(got.ok()) << got.status();
  auto typed = ResourceSlice::FromJson(*got);
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->spec.driver, driver);
  ASSERT_EQ(typed->spec.devices.size(), 1u);
  EXPECT_EQ(typed->spec.devices[0].name, "gpu-0");

  // Field selector on spec.driver plus a label selector.
  auto listed = client_->List(
      Slices(), "",
      {.label_selector = "test-run=" + run_, .field_selector = "spec.driver=" + driver});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ((*listed)["items"].size(), 1u);
  auto none = client_->List(
      Slices(), "",
      {.label_selector = "test-run=" + run_, .field_selector = "spec.driver=other.example.com"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE((*none)["items"].empty());

  // Update through PUT, carrying the resourceVersion precondition.
  nlohmann::json obj = *got;
  obj["metadata"]["labels"]["updated"] = "yes";
  auto updated = client_->Update(Slices(), "", obj);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*updated)["metadata"]["labels"]["updated"], "yes");
  // A second PUT of the stale object is a Conflict.
  auto stale = client_->Update(Slices(), "", obj);
  EXPECT_TRUE(IsConflict(stale.status())) << stale.status();

  auto patched = client_->MergePatch(Slices(), "", name,
                                     {{"metadata", {{"annotations", {{"patched", "1"}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ((*patched)["metadata"]["annotations"]["patched"], "1");

  nlohmann::json apply = SliceJson(name, driver, run_);
  apply["spec"]["pool"]["generation"] = 2;
  auto applied = client_->Apply(Slices(), "", apply);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*applied)["spec"]["pool"]["generation"], 2);

  // Delete with a wrong UID precondition changes nothing; with the right one it deletes.
  absl::Status wrong = client_->Delete(Slices(), "", name, {.uid = "not-the-uid"});
  EXPECT_TRUE(IsConflict(wrong)) << wrong;
  EXPECT_TRUE(client_->Get(Slices(), "", name).ok());
  ASSERT_TRUE(client_->Delete(Slices(), "", name, {.uid = uid}).ok());
  auto gone = client_->Get(Slices(), "", name);
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr(name));
}

TEST_F(ClientIntegrationTest, ListPaginatesAcrossContinueTokens) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(
        client_->Create(Slices(), "", SliceJson(Unique("page"), "gpu.test.example.com", run_))
            .ok());
  }
  auto page = client_->List(Slices(), "", {.label_selector = "test-run=" + run_, .limit = 3});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ((*page)["items"].size(), 3u);
  EXPECT_FALSE((*page)["metadata"].value("continue", "").empty());
  auto all = client_->ListAll(Slices(), "", {.label_selector = "test-run=" + run_, .limit = 3});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)["items"].size(), 7u);
  EXPECT_FALSE((*all)["metadata"]["resourceVersion"].get<std::string>().empty());
}

TEST_F(ClientIntegrationTest, ResourceClaimStatusUpdateAndConflictRetry) {
  std::string ns = "default";
  std::string name = Unique("claim");
  nlohmann::json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.example.com"}}}}}}}}}}};
  auto created = client_->Create(Claims(), ns, claim);
  ASSERT_TRUE(created.ok()) << created.status();

  // Two writers race on labels; the loser retries on Conflict with a fresh read.
  nlohmann::json first = *created;
  nlohmann::json second = *created;
  first["metadata"]["labels"]["writer"] = "first";
  ASSERT_TRUE(client_->Update(Claims(), ns, first).ok());
  int attempts = 0;
  absl::Status s = RetryOnConflict([&]() -> absl::Status {
    ++attempts;
    if (attempts > 1) {
      auto fresh = client_->Get(Claims(), ns, name);
      if (!fresh.ok()) return fresh.status();
      second = *fresh;
    }
    second["metadata"]["annotations"]["second"] = "done";
    return client_->Update(Claims(), ns, second).status();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(attempts, 2);
  auto final_claim = client_->Get(Claims(), ns, name);
  ASSERT_TRUE(final_claim.ok());
  EXPECT_EQ((*final_claim)["metadata"]["labels"]["writer"], "first");
  EXPECT_EQ((*final_claim)["metadata"]["annotations"]["second"], "done");

  // The status subresource: allocate the claim the way the scheduler's binding step does.
  nlohmann::json with_status = *final_claim;
  with_status["status"] = {{"allocation",
                            {{"devices",
                              {{"results",
                                {{{"request", "gpu"},
                                  {"driver", "gpu.example.com"},
                                  {"pool", "node1"},
                                  {"device", "gpu-0"}}}}}}}}};
  auto status_updated = client_->UpdateStatus(Claims(), ns, with_status);
  ASSERT_TRUE(status_updated.ok()) << status_updated.status();
  auto typed = ResourceClaim::FromJson(*status_updated);
  ASSERT_TRUE(typed.ok()) << typed.status();
  ASSERT_TRUE(typed->status.allocation.has_value());
  ASSERT_EQ(typed->status.allocation->devices.results.size(), 1u);
  EXPECT_EQ(typed->status.allocation->devices.results[0].device, "gpu-0");
  EXPECT_TRUE(client_->Delete(Claims(), ns, name).ok());
}

TEST_F(ClientIntegrationTest, ForbiddenCarriesTheServersMessage) {
  auto cfg = LoadKubeconfig(dra::testing::LimitedKubeconfig());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto limited = Client::Create(*cfg);
  ASSERT_TRUE(limited.ok());
  auto list = (*limited)->List(Slices(), "");
  EXPECT_TRUE(IsForbidden(list.status())) << list.status();
  EXPECT_EQ(list.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("dra-test-limited"));
  EXPECT_THAT(std::string(list.status().message()),
              HasSubstr("cannot list resource \"resourceslices\""));
}

TEST_F(ClientIntegrationTest, ExpiredClientCertificateIsNamedInTheError) {
  auto cfg = LoadKubeconfig(dra::testing::ExpiredKubeconfig());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto expired = Client::Create(*cfg);
  ASSERT_TRUE(expired.ok());
  auto list = (*expired)->List(Slices(), "");
  EXPECT_TRUE(IsUnauthorized(list.status())) << list.status();
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("client certificate expired"));
  EXPECT_EQ(std::string(list.status().message()).find('\n'), std::string::npos);
}

TEST_F(ClientIntegrationTest, ServiceAccountTokenAuthenticates) {
  auto cfg = LoadKubeconfig(dra::testing::TokenKubeconfig());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_FALSE(cfg->bearer_token.empty() && cfg->bearer_token_file.empty());
  auto token_client = Client::Create(*cfg);
  ASSERT_TRUE(token_client.ok());
  auto list = (*token_client)->List(Slices(), "", {.limit = 1});
  EXPECT_TRUE(list.ok()) << list.status();
}

TEST_F(ClientIntegrationTest, UnreachableServerIsOneLineUnavailable) {
  RestConfig cfg = client_->config();
  cfg.server = "https://127.0.0.1:1";
  auto c = Client::Create(cfg);
  ASSERT_TRUE(c.ok());
  auto got = (*c)->Get(Slices(), "", "x");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("127.0.0.1:1"));
  EXPECT_EQ(std::string(got.status().message()).find('\n'), std::string::npos);
}

// Watches from `rv` for at most a second. A watch cache that is (re)initializing answers 429 (it
// does on a just-started API server): wait for it, at most 30 s, and return the first other answer.
absl::Status WatchBriefly(Client& client, const std::string& rv) {
  absl::Status s;
  for (int attempt = 0; attempt < 30; ++attempt) {
    s = client.Watch(Slices(), "", {.resource_version = rv, .timeout_seconds = 1},
                     [](WatchEvent&&) { return false; });
    if (!IsTooManyRequests(s) && !absl::IsUnavailable(s)) break;
    absl::SleepFor(absl::Seconds(1));
  }
  return s;
}

TEST_F(ClientIntegrationTest, WatchFromCompactedVersionIsGone) {
  // The condition is made here, not assumed from the cluster's age. A watch is served from the API
  // server's watch cache, whose window begins at the revision the cache listed at when the server
  // started: on a just-created cluster that can be revision 1, and watching from it then succeeds.
  // So: (1) compact etcd at its current revision R, so nothing below R is in storage; (2) restart
  // the API server, so its caches begin at R or later. A watch from R-1 is then too old on either
  // path, and the API server's 410 Expired must reach the caller as Gone.
  auto compacted = dra::testing::CompactEtcdNow();
  ASSERT_TRUE(compacted.ok()) << compacted.status();
  ASSERT_GT(*compacted, 1);
  ASSERT_EQ(dra::testing::RestartApiServer("restart-apiserver-compaction-test.log"), 0)
      << "restart-apiserver.sh failed; see " << dra::testing::ClusterDir()
      << "/logs/restart-apiserver-compaction-test.log";

  absl::Status s = WatchBriefly(*client_, absl::StrCat(*compacted - 1));
  EXPECT_TRUE(IsGone(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("too old")) << s;

  // Control: a watch from the newest resourceVersion is within the window and is served.
  auto list = client_->List(Slices(), "", {.limit = 1});
  ASSERT_TRUE(list.ok()) << list.status();
  absl::Status fresh =
      WatchBriefly(*client_, (*list)["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_TRUE(fresh.ok()) << fresh;
}

TEST_F(ClientIntegrationTest, WatchDeliversAddModifyDeleteInOrder) {
  auto list = client_->List(Slices(), "", {.label_selector = "test-run=" + run_});
  ASSERT_TRUE(list.ok());
  std::string rv = (*list)["metadata"]["resourceVersion"];
  std::string name = Unique("watched");
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(200));
    auto c = client_->Create(Slices(), "", SliceJson(name, "gpu.test.example.com", run_));
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(
        client_->MergePatch(Slices(), "", name, {{"metadata", {{"labels", {{"x", "y"}}}}}}).ok());
    ASSERT_TRUE(client_->Delete(Slices(), "", name).ok());
  });
  std::vector<WatchEvent::Type> seen;
  absl::Status s = client_->Watch(
      Slices(), "",
      {.label_selector = "test-run=" + run_, .resource_version = rv, .timeout_seconds = 30},
      [&](WatchEvent&& e) {
        if (e.type != WatchEvent::Type::kBookmark) seen.push_back(e.type);
        return seen.size() < 3;
      });
  writer.join();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen, ::testing::ElementsAre(WatchEvent::Type::kAdded, WatchEvent::Type::kModified,
                                           WatchEvent::Type::kDeleted));
}

}  // namespace
}  // namespace dra::k8s
