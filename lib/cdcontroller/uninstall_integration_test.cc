// `compute-domain-controller cleanup` against the local cluster's API server, both ways.
// DeleteAllComputeDomains (--delete-compute-domains): it deletes the ComputeDomains, waits while a
// finalizer holds them and returns once they are gone; it fails after its timeout naming each
// domain left and its finalizers. A finalizer of the test's own ("hold") stands in for the
// controller's, so that the test decides when a domain is finalized.
// ReleaseAllComputeDomains (the default): it scales a stand-in controller Deployment to 0, removes
// the objects a controller made for the domain (labelled with its UID, carrying the controller's
// finalizer), the node label and the controller's finalizer, and leaves the domain. No controller
// may run in the cluster (the test command runs the integration tests before any driver is
// installed): it would put back what the test removes. Each test works in its own namespaces
// (CleanupOptions::only_namespace, driver_namespace).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdcontroller/testing_cluster.h"
#include "lib/cdcontroller/uninstall.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_apps.h"
#include "lib/k8s/objects_resource.h"
#include "test/support/crds.h"

namespace dra::cdcontroller {
namespace {

using ::dra::cdcontroller::testing::AdminClient;
using ::dra::cdcontroller::testing::ComputeDomainManifest;
using ::dra::cdcontroller::testing::Eventually;
using ::dra::cdcontroller::testing::FakeNode;
using ::dra::cdcontroller::testing::ScopedNamespace;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kHold[] = "test.dra.nvidia.com/hold";
constexpr const k8s::ResourceInfo& kCD = k8s::ComputeDomain::kResource;
constexpr const k8s::ResourceInfo& kDS = k8s::DaemonSet::kResource;
constexpr const k8s::ResourceInfo& kRCT = k8s::ResourceClaimTemplate::kResource;
constexpr k8s::ResourceInfo kDeployments{"apps", "v1", "Deployment", "deployments", true};
const std::string kOurs(k8s::kComputeDomainFinalizer);

// Pods of this template are never scheduled (no node has the label), so nothing runs.
json PodTemplate(const std::string& app) {
  return {{"metadata", {{"labels", {{"app", app}}}}},
          {"spec",
           {{"nodeSelector", {{"test.dra.nvidia.com/no-such-node", "true"}}},
            {"containers", {{{"name", "c"}, {"image", "registry.invalid/none:0"}}}}}}};
}
json Labelled(const std::string& uid, const json& finalizers) {
  return {{"labels", {{std::string(k8s::kComputeDomainLabel), uid}}}, {"finalizers", finalizers}};
}

class UninstallCleanupIntegrationTest : public ::testing::Test {
 protected:
  // The ComputeDomain CRDs: every run starts from an empty control plane.
  static void SetUpTestSuite() {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }

  void CreateHeld(const std::string& name) {
    json cd = ComputeDomainManifest(ns_.name(), name, 0, name + "-channel");
    cd["metadata"]["finalizers"] = json::array({kHold});
    auto r = client_->Create(kCD, ns_.name(), cd);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  bool Deleting(const std::string& name) {
    auto o = client_->Get(kCD, ns_.name(), name);
    return o.ok() && (*o)["metadata"].contains("deletionTimestamp");
  }
  bool Gone(const std::string& name) {
    return absl::IsNotFound(client_->Get(kCD, ns_.name(), name).status());
  }
  // Drops the test's finalizer (a controller's, added meanwhile by one running in the cluster,
  // stays).
  absl::Status Release(const std::string& name) {
    return k8s::RetryOnConflict([&]() -> absl::Status {
      auto o = client_->Get(kCD, ns_.name(), name);
      if (absl::IsNotFound(o.status())) return absl::OkStatus();
      if (!o.ok()) return o.status();
      json f = json::array();
      for (const json& x : (*o)["metadata"].value("finalizers", json::array())) {
        if (x != kHold) f.push_back(x);
      }
      (*o)["metadata"]["finalizers"] = f;
      auto u = client_->Update(kCD, ns_.name(), *o);
      return absl::IsNotFound(u.status()) ? absl::OkStatus() : u.status();
    });
  }
  CleanupOptions Options(absl::Duration timeout) {
    return {.timeout = timeout,
            .poll_interval = absl::Milliseconds(100),
            .driver_namespace = "nvidia-dra-driver-gpu",
            .only_namespace = ns_.name()};
  }

  std::unique_ptr<k8s::Client> client_ = AdminClient();
  ScopedNamespace ns_{client_.get(), "h34-uninstall"};
};

TEST_F(UninstallCleanupIntegrationTest, NoComputeDomainsIsNothingToDo) {
  EXPECT_TRUE(DeleteAllComputeDomains(client_.get(), Options(absl::Seconds(5))).ok());
}

TEST_F(UninstallCleanupIntegrationTest, DeletesEveryDomainAndWaitsUntilTheFinalizersAreGone) {
  CreateHeld("cd-a");
  CreateHeld("cd-b");
  // The stand-in controller: finalizes each domain once it is being deleted, cd-b a second later
  // than cd-a.
  std::atomic<int> released = 0;
  std::thread finalizer([&] {
    for (const char* name : {"cd-a", "cd-b"}) {
      if (Eventually([&] { return Deleting(name); }, absl::Seconds(30)) ==
          absl::InfiniteDuration()) {
        return;
      }
      absl::SleepFor(absl::Seconds(1));
      if (Release(name).ok()) ++released;
    }
  });
  absl::Status s = DeleteAllComputeDomains(client_.get(), Options(absl::Seconds(60)));
  const int released_at_return = released.load();
  finalizer.join();
  ASSERT_TRUE(s.ok()) << s;
  // It returned only after both finalizers were released and the domains were gone.
  EXPECT_EQ(released_at_return, 2);
  EXPECT_TRUE(Gone("cd-a"));
  EXPECT_TRUE(Gone("cd-b"));
}

TEST_F(UninstallCleanupIntegrationTest, FailsAfterTheTimeoutNamingEachDomainLeft) {
  CreateHeld("cd-stuck");
  absl::Status s = DeleteAllComputeDomains(client_.get(), Options(absl::Seconds(2)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("1 ComputeDomain(s) not finalized within 2s: " + ns_.name() +
                                     "/cd-stuck (finalizers: "));
  EXPECT_THAT(s.message(), HasSubstr(kHold));
  EXPECT_THAT(s.message(), HasSubstr("kubectl -n nvidia-dra-driver-gpu logs"));
  EXPECT_THAT(s.message(), HasSubstr("helm uninstall --no-hooks"));
  // It was deleted (it is only held), and goes once released.
  EXPECT_TRUE(Deleting("cd-stuck"));
  ASSERT_TRUE(Release("cd-stuck").ok());
  EXPECT_NE(Eventually([&] { return Gone("cd-stuck"); }), absl::InfiniteDuration());
}

TEST_F(UninstallCleanupIntegrationTest, StopsWhenAsked) {
  CreateHeld("cd-held");
  CleanupOptions o = Options(absl::Seconds(60));
  std::atomic<bool> stop = false;
  o.stopped = [&] { return stop.load(); };
  std::thread stopper([&] {
    Eventually([&] { return Deleting("cd-held"); }, absl::Seconds(30));
    stop = true;
  });
  absl::Status s = DeleteAllComputeDomains(client_.get(), o);
  stopper.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/cd-held"));
  ASSERT_TRUE(Release("cd-held").ok());
}

// The default uninstall: every domain stays, without the controller's finalizer (other finalizers
// stay), and what the controller made for it is gone; the controller was stopped first.
TEST_F(UninstallCleanupIntegrationTest, ReleaseLeavesTheDomainsAndRemovesWhatTheDriverMade) {
  ScopedNamespace drv(client_.get(), "h5-driver");
  json cd = ComputeDomainManifest(ns_.name(), "cd-a", 0, "cd-a-channel");
  cd["metadata"]["finalizers"] = json::array({kOurs, kHold});
  auto created = client_->Create(kCD, ns_.name(), cd);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string uid = (*created)["metadata"]["uid"];
  // A stand-in for the controller's Deployment, and what a controller makes for the domain.
  json deployment = {{"apiVersion", "apps/v1"},
                     {"kind", "Deployment"},
                     {"metadata", {{"name", "controller"}}},
                     {"spec",
                      {{"replicas", 1},
                       {"selector", {{"matchLabels", {{"app", "h5-controller"}}}}},
                       {"template", PodTemplate("h5-controller")}}}};
  ASSERT_TRUE(client_->Create(kDeployments, drv.name(), deployment).ok());
  json rct = {{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceClaimTemplate"},
              {"spec", {{"spec", json::object()}}}};
  json workload_rct = rct, daemon_rct = rct;
  workload_rct["metadata"] = Labelled(uid, {kOurs});
  workload_rct["metadata"]["name"] = "cd-a-channel";
  daemon_rct["metadata"] = Labelled(uid, {kOurs});
  daemon_rct["metadata"]["name"] = "cd-a-daemon";
  ASSERT_TRUE(client_->Create(kRCT, ns_.name(), workload_rct).ok());
  ASSERT_TRUE(client_->Create(kRCT, drv.name(), daemon_rct).ok());
  json ds = {{"apiVersion", "apps/v1"},
             {"kind", "DaemonSet"},
             {"metadata", Labelled(uid, {kOurs})},
             {"spec",
              {{"selector", {{"matchLabels", {{"app", "h5-imex"}}}}},
               {"template", PodTemplate("h5-imex")}}}};
  ds["metadata"]["name"] = "cd-a-imex";
  ASSERT_TRUE(client_->Create(kDS, drv.name(), ds).ok());
  // Not the domain's: stays.
  json other = ds;
  other["metadata"] = {{"name", "unrelated"}};
  ASSERT_TRUE(client_->Create(kDS, drv.name(), other).ok());
  FakeNode node(client_.get(), uid, "h5-fake-node");

  CleanupOptions o = Options(absl::Seconds(60));
  o.driver_namespace = drv.name();
  o.controller_deployment = "controller";
  absl::Status s = ReleaseAllComputeDomains(client_.get(), o);
  ASSERT_TRUE(s.ok()) << s;

  auto deployed = client_->Get(kDeployments, drv.name(), "controller");
  ASSERT_TRUE(deployed.ok()) << deployed.status();
  EXPECT_EQ((*deployed)["spec"]["replicas"], 0);
  auto kept = client_->Get(kCD, ns_.name(), "cd-a");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE((*kept)["metadata"].contains("deletionTimestamp"));
  EXPECT_THAT((*kept)["metadata"]["finalizers"].get<std::vector<std::string>>(),
              ElementsAre(kHold));
  EXPECT_EQ((*kept)["spec"]["channel"]["resourceClaimTemplate"]["name"], "cd-a-channel");
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kRCT, ns_.name(), "cd-a-channel").status()));
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kRCT, drv.name(), "cd-a-daemon").status()));
  EXPECT_TRUE(absl::IsNotFound(client_->Get(kDS, drv.name(), "cd-a-imex").status()));
  EXPECT_TRUE(client_->Get(kDS, drv.name(), "unrelated").ok());
  EXPECT_EQ(node.Label(), "");
  ASSERT_TRUE(Release("cd-a").ok());
}

// A domain whose objects do not go (here a DaemonSet another finalizer holds) is named after the
// timeout, with what holds it; the domain keeps the controller's finalizer meanwhile.
TEST_F(UninstallCleanupIntegrationTest, ReleaseFailsAfterTheTimeoutNamingTheDomainLeft) {
  ScopedNamespace drv(client_.get(), "h5-driver");
  json cd = ComputeDomainManifest(ns_.name(), "cd-b", 0, "cd-b-channel");
  cd["metadata"]["finalizers"] = json::array({kOurs});
  auto created = client_->Create(kCD, ns_.name(), cd);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string uid = (*created)["metadata"]["uid"];
  json ds = {{"apiVersion", "apps/v1"},
             {"kind", "DaemonSet"},
             {"metadata", Labelled(uid, {kOurs, kHold})},
             {"spec",
              {{"selector", {{"matchLabels", {{"app", "h5-imex"}}}}},
               {"template", PodTemplate("h5-imex")}}}};
  ds["metadata"]["name"] = "cd-b-imex";
  ASSERT_TRUE(client_->Create(kDS, drv.name(), ds).ok());

  CleanupOptions o = Options(absl::Seconds(2));
  o.driver_namespace = drv.name();
  absl::Status s = ReleaseAllComputeDomains(client_.get(), o);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("1 ComputeDomain(s) not released within 2s: " + ns_.name() +
                                     "/cd-b (waiting for 1 object(s) to be removed, first "
                                     "DaemonSet " +
                                     drv.name() + "/cd-b-imex)"));
  EXPECT_THAT(s.message(), HasSubstr("helm uninstall --no-hooks"));
  auto kept = client_->Get(kCD, ns_.name(), "cd-b");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT((*kept)["metadata"]["finalizers"].get<std::vector<std::string>>(),
              ElementsAre(kOurs));
  // Let go of the DaemonSet: the next run releases the domain.
  auto held = client_->Get(kDS, drv.name(), "cd-b-imex");
  ASSERT_TRUE(held.ok()) << held.status();
  (*held)["metadata"]["finalizers"] = json::array();
  ASSERT_TRUE(client_->Update(kDS, drv.name(), *held).ok());
  o.timeout = absl::Seconds(30);
  s = ReleaseAllComputeDomains(client_.get(), o);
  ASSERT_TRUE(s.ok()) << s;
  kept = client_->Get(kCD, ns_.name(), "cd-b");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)["metadata"].value("finalizers", json::array()), json::array());
}

// A domain without the controller's finalizer is none of the driver's: left as it is, and no
// controller is stopped for it.
TEST_F(UninstallCleanupIntegrationTest, ReleaseLeavesDomainsWithoutTheDriversFinalizerAlone) {
  CreateHeld("cd-c");
  CleanupOptions o = Options(absl::Seconds(5));
  o.controller_deployment = "no-such-deployment";
  absl::Status s = ReleaseAllComputeDomains(client_.get(), o);
  ASSERT_TRUE(s.ok()) << s;
  auto kept = client_->Get(kCD, ns_.name(), "cd-c");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT((*kept)["metadata"]["finalizers"].get<std::vector<std::string>>(),
              ElementsAre(kHold));
  ASSERT_TRUE(Release("cd-c").ok());
}

}  // namespace
}  // namespace dra::cdcontroller
