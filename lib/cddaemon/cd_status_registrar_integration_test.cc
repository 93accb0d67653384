// The legacy registration path (ComputeDomainCliques=false) against the local API server: two
// daemons keep their entries in ComputeDomain.status.nodes; in IP mode the daemon list is handed
// on only once spec.numNodes daemons are listed.

#include <unistd.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "lib/cddaemon/cd_status_registrar.h"
#include "lib/k8s/rest_config.h"
#include "test/support/cluster_env.h"
#include "test/support/crds.h"

namespace dra::cddaemon {
namespace {

constexpr k8s::ResourceInfo kNamespace{"", "v1", "Namespace", "namespaces", false};

class CdStatusRegistrarIntegrationTest : public ::testing::Test {
 protected:
  // The ComputeDomain CRDs: every run starts from an empty control plane.
  static void SetUpTestSuite() {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }

  void SetUp() override {
    auto rest = k8s::LoadKubeconfig(testing::AdminKubeconfig());
    ASSERT_TRUE(rest.ok()) << rest.status();
    auto client = k8s::Client::Create(*rest);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    std::mt19937 rng(std::random_device{}());
    ns_ = absl::StrFormat("cdd-cds-%06x", rng() & 0xffffff);
    ASSERT_TRUE(client_->Create(kNamespace, "", {{"metadata", {{"name", ns_}}}}).ok());
    nlohmann::json cd = {
        {"apiVersion", "resource.nvidia.com/v1beta1"},
        {"kind", "ComputeDomain"},
        {"metadata", {{"name", "domain"}, {"namespace", ns_}}},
        {"spec", {{"numNodes", 2}, {"channel", {{"resourceClaimTemplate", {{"name", "ch"}}}}}}}};
    auto out = client_->Create(k8s::ComputeDomain::kResource, ns_, cd);
    ASSERT_TRUE(out.ok()) << out.status();
    uid_ = (*out)["metadata"]["uid"];
  }
  void TearDown() override { (void)client_->Delete(kNamespace, "", ns_); }

  std::unique_ptr<CdStatusRegistrar> Make(int i, const std::string& uid, bool dns_names) {
    CdStatusRegistrarOptions o{.cd_namespace = ns_,
                               .cd_name = "domain",
                               .cd_uid = uid,
                               .me = {.node_name = absl::StrCat("node-", i),
                                      .pod_ip = absl::StrCat("10.3.0.", i),
                                      .clique_id = "cluster.5",
                                      .max_nodes = 4},
                               .dns_names = dns_names};
    return std::make_unique<CdStatusRegistrar>(
        client_.get(), o, [this, i](const std::vector<k8s::ComputeDomainDaemonInfo>& d) {
          absl::MutexLock lock(&mu_);
          last_size_[i] = static_cast<int>(d.size());
          return absl::OkStatus();
        });
  }

  std::vector<k8s::ComputeDomainNode> Nodes() {
    auto j = client_->Get(k8s::ComputeDomain::kResource, ns_, "domain");
    if (!j.ok()) return {};
    auto cd = k8s::ComputeDomain::FromJson(*j);
    return cd.ok() ? cd->status.nodes : std::vector<k8s::ComputeDomainNode>{};
  }
  bool Eventually(const std::function<bool()>& cond) {
    absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (cond()) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return cond();
  }
  int LastSize(int i) {
    absl::MutexLock lock(&mu_);
    auto it = last_size_.find(i);
    return it == last_size_.end() ? -1 : it->second;
  }

  std::unique_ptr<k8s::Client> client_;
  std::string ns_;
  std::string uid_;
  absl::Mutex mu_;
  std::map<int, int> last_size_ ABSL_GUARDED_BY(mu_);
};

TEST_F(CdStatusRegistrarIntegrationTest, IpModeWaitsForNumNodesThenBothRegisteredAndLeave) {
  auto a = Make(1, uid_, /*dns_names=*/false);
  auto b = Make(2, uid_, /*dns_names=*/false);
  a->Start();
  ASSERT_TRUE(Eventually([&] { return Nodes().size() == 1; }));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(LastSize(1), -1) << "1 of numNodes=2 listed: IMEX must not start yet";
  b->Start();
  ASSERT_TRUE(Eventually([&] { return LastSize(1) == 2 && LastSize(2) == 2; }));
  std::vector<k8s::ComputeDomainNode> nodes = Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_NE(nodes[0].index, nodes[1].index);
  EXPECT_EQ(std::set<std::string>({nodes[0].ip_address, nodes[1].ip_address}),
            std::set<std::string>({"10.3.0.1", "10.3.0.2"}));

  a->SetReady(true);
  EXPECT_TRUE(Eventually([&] {
    for (const auto& n : Nodes()) {
      if (n.name == "node-1") return n.status == "Ready";
    }
    return false;
  }));
  ASSERT_TRUE(a->Stop(absl::Seconds(10)).ok());
  nodes = Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, "node-2");
  ASSERT_TRUE(b->Stop(absl::Seconds(10)).ok());
  EXPECT_TRUE(Nodes().empty());
}

TEST_F(CdStatusRegistrarIntegrationTest, DnsModeHandsOnAtOnceAndWrongUidWritesNothing) {
  auto wrong = Make(3, "00000000-0000-0000-0000-000000000000", /*dns_names=*/true);
  wrong->Start();
  absl::SleepFor(absl::Seconds(1));
  EXPECT_TRUE(Nodes().empty()) << "a ComputeDomain of another UID is not ours";
  ASSERT_TRUE(wrong->Stop(absl::Seconds(2)).ok());
  auto a = Make(1, uid_, /*dns_names=*/true);
  a->Start();
  EXPECT_TRUE(Eventually([&] { return LastSize(1) == 1; }));
  ASSERT_TRUE(a->Stop(absl::Seconds(10)).ok());
}

}  // namespace
}  // namespace dra::cddaemon
