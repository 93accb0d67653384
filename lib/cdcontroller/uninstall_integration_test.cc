// `compute-domain-controller cleanup` (DeleteAllComputeDomains) against the local cluster's API
// server: it deletes the ComputeDomains, waits while a finalizer holds them and returns once they
// are gone; it fails after its timeout naming each domain left and its finalizers. A finalizer of
// the test's own ("hold") stands in for the controller's, so that the test decides when a domain
// is finalized. Each test works in its own namespace (CleanupOptions::only_namespace).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdcontroller/testing_cluster.h"
#include "lib/cdcontroller/uninstall.h"
#include "lib/k8s/errors.h"
#include "test/support/crds.h"

namespace dra::cdcontroller {
namespace {

using ::dra::cdcontroller::testing::AdminClient;
using ::dra::cdcontroller::testing::ComputeDomainManifest;
using ::dra::cdcontroller::testing::Eventually;
using ::dra::cdcontroller::testing::ScopedNamespace;
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr char kHold[] = "test.dra.nvidia.com/hold";
constexpr const k8s::ResourceInfo& kCD = k8s::ComputeDomain::kResource;

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

}  // namespace
}  // namespace dra::cdcontroller
