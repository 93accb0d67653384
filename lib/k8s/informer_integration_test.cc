// The informer against the real API server, including a kube-apiserver restart mid-stream.

#include <atomic>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/client.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/informer.h"
#include "lib/k8s/objects_resource.h"
#include "test/support/cluster_env.h"

namespace dra::k8s {
namespace {

nlohmann::json Slice(const std::string& name, const std::string& run) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}, {"labels", {{"informer-run", run}}}}},
          {"spec",
           {{"driver", "informer.test.example.com"},
            {"nodeName", "node-" + run},
            {"pool", {{"name", name}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", nlohmann::json::array()}}}};
}

// Records handler calls so the test can prove each object was added exactly once.
struct Recorder {
  absl::Mutex mu;
  std::map<std::string, int> adds ABSL_GUARDED_BY(mu);
  std::map<std::string, int> deletes ABSL_GUARDED_BY(mu);
  int updates ABSL_GUARDED_BY(mu) = 0;

  Informer<ResourceSlice>::Handlers Handlers() {
    return {
        .on_add =
            [this](const auto& s) {
              absl::MutexLock l(&mu);
              ++adds[s->metadata.name];
            },
        .on_update =
            [this](const auto&, const auto&) {
              absl::MutexLock l(&mu);
              ++updates;
            },
        .on_delete =
            [this](const auto& s) {
              absl::MutexLock l(&mu);
              ++deletes[s->metadata.name];
            },
    };
  }
  size_t AddCount() {
    absl::MutexLock l(&mu);
    return adds.size();
  }
};

class InformerIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto c = Client::Create(*cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    run_ = absl::StrCat("inf-", ::getpid(), "-", absl::ToUnixMillis(absl::Now()) % 100000);
  }
  void TearDown() override {
    if (!client_) return;
    auto list =
        client_->ListAll(ResourceSlice::kResource, "", {.label_selector = "informer-run=" + run_});
    if (!list.ok()) return;
    for (const auto& item : (*list)["items"]) {
      (void)client_->Delete(ResourceSlice::kResource, "",
                            item["metadata"]["name"].get<std::string>());
    }
  }
  // Creates the object, retrying while the API server is unavailable (it may be restarting).
  void CreateWithRetry(const std::string& name) {
    for (int i = 0; i < 300; ++i) {
      auto r = client_->Create(ResourceSlice::kResource, "", Slice(name, run_));
      if (r.ok() || absl::IsAlreadyExists(r.status())) return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    FAIL() << "could not create " << name;
  }
  bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout) {
    absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (cond()) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return cond();
  }
  std::unique_ptr<Client> client_;
  std::string run_;
};

TEST_F(InformerIntegrationTest, CacheHandlersAndIndex) {
  CreateWithRetry(run_ + "-pre");
  Informer<ResourceSlice> informer(client_.get(), "", {.label_selector = "informer-run=" + run_});
  Recorder rec;
  informer.AddHandlers(rec.Handlers());
  informer.AddIndex("node", [](const ResourceSlice& s) {
    return std::vector<std::string>{s.spec.node_name.value_or("")};
  });
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(10)));
  EXPECT_NE(informer.Get(run_ + "-pre"), nullptr);

  CreateWithRetry(run_ + "-post");
  ASSERT_TRUE(WaitFor([&] { return informer.Get(run_ + "-post") != nullptr; }, absl::Seconds(10)));
  EXPECT_EQ(informer.ByIndex("node", "node-" + run_).size(), 2u);
  EXPECT_TRUE(informer.ByIndex("node", "elsewhere").empty());

  ASSERT_TRUE(client_
                  ->MergePatch(ResourceSlice::kResource, "", run_ + "-post",
                               {{"metadata", {{"annotations", {{"a", "b"}}}}}})
                  .ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto s = informer.Get(run_ + "-post");
        return s && s->metadata.annotations.contains("a");
      },
      absl::Seconds(10)));
  ASSERT_TRUE(client_->Delete(ResourceSlice::kResource, "", run_ + "-pre").ok());
  ASSERT_TRUE(WaitFor([&] { return informer.Get(run_ + "-pre") == nullptr; }, absl::Seconds(10)));
  informer.Stop();

  absl::MutexLock l(&rec.mu);
  EXPECT_EQ(rec.adds[run_ + "-pre"], 1);
  EXPECT_EQ(rec.adds[run_ + "-post"], 1);
  EXPECT_EQ(rec.deletes[run_ + "-pre"], 1);
  EXPECT_GE(rec.updates, 1);
  EXPECT_EQ(informer.ByIndex("node", "node-" + run_).size(), 1u);
}

TEST_F(InformerIntegrationTest, ResyncRedeliversUnchangedObjectsAsUpdates) {
  CreateWithRetry(run_ + "-r");
  Informer<ResourceSlice> informer(client_.get(), "", {.label_selector = "informer-run=" + run_},
                                   absl::Milliseconds(200));
  std::atomic<int> same_version_updates{0};
  informer.AddHandlers({.on_update = [&](const auto& old_obj, const auto& new_obj) {
    if (old_obj->metadata.resource_version == new_obj->metadata.resource_version) {
      ++same_version_updates;
    }
  }});
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(10)));
  EXPECT_TRUE(WaitFor([&] { return same_version_updates >= 2; }, absl::Seconds(5)));
  informer.Stop();
}

// The acceptance test for resumable watches: objects are created before, during and after a
// kube-apiserver restart; the informer must end with exactly the server's set and must have
// reported each object added exactly once.
TEST_F(InformerIntegrationTest, NoEventLostOrDuplicatedAcrossApiServerRestart) {
  Informer<ResourceSlice> informer(client_.get(), "", {.label_selector = "informer-run=" + run_});
  Recorder rec;
  informer.AddHandlers(rec.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(absl::Seconds(10)));

  constexpr int kBefore = 5, kDuring = 10, kAfter = 5;
  for (int i = 0; i < kBefore; ++i) CreateWithRetry(absl::StrCat(run_, "-a", i));
  ASSERT_TRUE(WaitFor([&] { return rec.AddCount() == kBefore; }, absl::Seconds(10)));

  std::atomic<bool> restart_done{false};
  int restart_rc = -1;
  std::thread restarter([&] {
    restart_rc = dra::testing::RestartApiServer("restart-apiserver-test.log");
    restart_done = true;
  });
  // Writes race with the restart: some land before the stop, some wait for the new server.
  for (int i = 0; i < kDuring; ++i) {
    CreateWithRetry(absl::StrCat(run_, "-b", i));
    absl::SleepFor(absl::Milliseconds(150));
  }
  restarter.join();
  ASSERT_EQ(restart_rc, 0) << "restart-apiserver.sh failed; see " << dra::testing::ClusterDir()
                           << "/logs/restart-apiserver-test.log";
  for (int i = 0; i < kAfter; ++i) CreateWithRetry(absl::StrCat(run_, "-c", i));

  constexpr int kTotal = kBefore + kDuring + kAfter;
  EXPECT_TRUE(WaitFor([&] { return informer.List().size() == kTotal; }, absl::Seconds(60)))
      << "informer holds " << informer.List().size() << " of " << kTotal;
  EXPECT_GE(informer.reflector().watches(), 2) << "the watch was never re-established";
  informer.Stop();

  auto server =
      client_->ListAll(ResourceSlice::kResource, "", {.label_selector = "informer-run=" + run_});
  ASSERT_TRUE(server.ok()) << server.status();
  std::set<std::string> server_names, cache_names;
  for (const auto& item : (*server)["items"]) server_names.insert(item["metadata"]["name"]);
  for (const auto& s : informer.List()) cache_names.insert(s->metadata.name);
  EXPECT_EQ(cache_names, server_names);
  EXPECT_EQ(server_names.size(), static_cast<size_t>(kTotal));
  absl::MutexLock l(&rec.mu);
  for (const std::string& n : server_names) {
    EXPECT_EQ(rec.adds[n], 1) << n << " was added " << rec.adds[n] << " times";
  }
  EXPECT_TRUE(rec.deletes.empty());
}

}  // namespace
}  // namespace dra::k8s
