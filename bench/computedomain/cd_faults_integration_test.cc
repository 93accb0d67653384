// ComputeDomain faults on simulated nodes (issue 16): the real compute-domain-controller and, per
// node, the real `compute-domain-daemon run` with the fake nvidia-imex, against the local API
// server, set up by SimDomain exactly as bench/computedomain does (Node and pod objects made by the
// test in place of kubelets). Each test asserts the outcome the fault must have; no timing is
// asserted beyond generous deadlines for convergence.
//
// DRA_CD_CHURN_ITERATIONS sets how many ComputeDomains ChurnLeavesNothingBehind creates and
// deletes (default 10; the long mode is 1000).

#include <signal.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/computedomain/sim_domain.h"
#include "gtest/gtest.h"
#include "lib/k8s/objects_apps.h"
#include "lib/k8s/objects_resource.h"
#include "test/support/build_paths.h"
#include "test/support/cluster_env.h"
#include "test/support/crds.h"

namespace dra::bench {
namespace {

constexpr absl::Duration kConverge = absl::Seconds(90);

SimOptions Options(int nodes) {
  const std::string bin = dra::testing::BinaryDir();
  SimOptions o;
  o.nodes = nodes;
  o.kubeconfig = dra::testing::AdminKubeconfig();
  o.controller_binary = bin + "/cmd/compute-domain-controller/compute-domain-controller";
  o.daemon_binary = bin + "/cmd/compute-domain-daemon/compute-domain-daemon";
  o.imex_binary = bin + "/test/doubles/imex/nvidia-imex";
  o.imex_ctl_binary = bin + "/test/doubles/imex/nvidia-imex-ctl";
  const char* tmp = std::getenv("TMPDIR");
  o.work_dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  o.probe_workers = 2;
  o.start_workers = 2;
  o.stopped = [] { return false; };
  return o;
}

// The ComputeDomain CRDs: every run starts from an empty control plane.
class CrdEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }
};
const ::testing::Environment* const kCrds = ::testing::AddGlobalTestEnvironment(new CrdEnvironment);

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// Every node of the domain listed once over all cliques, with indices unique per clique.
void ExpectEachNodeOnceWithUniqueIndices(SimDomain& sim, size_t nodes) {
  auto cliques = sim.Cliques();
  ASSERT_TRUE(cliques.ok()) << cliques.status();
  std::set<std::string> names;
  size_t entries = 0;
  for (const k8s::ComputeDomainClique& c : *cliques) {
    std::set<int64_t> indices;
    for (const auto& d : c.daemons) {
      ++entries;
      names.insert(d.node_name);
      EXPECT_TRUE(indices.insert(d.index).second)
          << "index " << d.index << " twice in " << c.metadata.name;
    }
  }
  EXPECT_EQ(entries, nodes);
  EXPECT_EQ(names.size(), nodes);
}

TEST(CdFaultsIntegrationTest, KilledDaemonMakesTheDomainNotReadyUntilItRunsAgain) {
  SimDomain sim(Options(3));
  {
    absl::Status begun = sim.Begin();
    ASSERT_TRUE(begun.ok()) << begun;
  }
  ASSERT_TRUE(sim.WaitReady(3, kConverge).ok()) << sim.WaitReady(3, absl::ZeroDuration());
  const pid_t other0 = sim.daemon_pid(0), other2 = sim.daemon_pid(2);

  ASSERT_TRUE(sim.KillDaemon(1).ok());
  absl::Status down = sim.WaitDomain(
      "NotReady with 3 nodes",
      [](const k8s::ComputeDomain& cd) {
        return cd.status.status == k8s::kComputeDomainStatusNotReady && cd.status.nodes.size() == 3;
      },
      kConverge);
  EXPECT_TRUE(down.ok()) << down;

  ASSERT_TRUE(sim.RestartDaemon(1).ok());
  absl::Status up = sim.WaitReady(3, kConverge);
  EXPECT_TRUE(up.ok()) << up;
  // The other nodes' daemons ran through it all.
  EXPECT_EQ(sim.daemon_pid(0), other0);
  EXPECT_EQ(sim.daemon_pid(2), other2);
  EXPECT_TRUE(Alive(other0));
  EXPECT_TRUE(Alive(other2));
  ExpectEachNodeOnceWithUniqueIndices(sim, 3);
}

TEST(CdFaultsIntegrationTest, DisappearedNodeLeavesTheStatusAndTheRestIsReady) {
  SimOptions o = Options(3);
  o.num_nodes = 2;  // the domain can do without one node
  SimDomain sim(o);
  {
    absl::Status begun = sim.Begin();
    ASSERT_TRUE(begun.ok()) << begun;
  }
  ASSERT_TRUE(sim.WaitReady(3, kConverge).ok());

  ASSERT_TRUE(sim.RemoveNode(2).ok());
  absl::Status s = sim.WaitReady(2, kConverge);
  EXPECT_TRUE(s.ok()) << s;
  ExpectEachNodeOnceWithUniqueIndices(sim, 2);
}

TEST(CdFaultsIntegrationTest, CliqueDeletedByHandIsRecreatedWithTheSameIndices) {
  SimDomain sim(Options(3));
  {
    absl::Status begun = sim.Begin();
    ASSERT_TRUE(begun.ok()) << begun;
  }
  ASSERT_TRUE(sim.WaitReady(3, kConverge).ok());
  auto before = sim.Cliques();
  ASSERT_TRUE(before.ok() && before->size() == 1);
  std::map<std::string, int64_t> index_of;
  for (const auto& d : (*before)[0].daemons) index_of[d.node_name] = d.index;
  const std::string uid_before = (*before)[0].metadata.uid;

  ASSERT_TRUE(sim.client()
                  .Delete(k8s::ComputeDomainClique::kResource, sim.driver_namespace(),
                          (*before)[0].metadata.name)
                  .ok());
  // Recreated (another uid) and complete again.
  const absl::Time deadline = absl::Now() + kConverge;
  std::vector<k8s::ComputeDomainClique> now;
  while (absl::Now() < deadline) {
    auto c = sim.Cliques();
    if (c.ok() && c->size() == 1 && (*c)[0].metadata.uid != uid_before &&
        (*c)[0].daemons.size() == 3) {
      now = *c;
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(now.size(), 1u) << "clique not recreated with 3 entries";
  absl::Status s = sim.WaitReady(3, kConverge);
  EXPECT_TRUE(s.ok()) << s;
  auto after = sim.Cliques();
  ASSERT_TRUE(after.ok() && after->size() == 1);
  for (const auto& d : (*after)[0].daemons) {
    EXPECT_EQ(d.index, index_of[d.node_name]) << d.node_name << " changed its index";
  }
  ExpectEachNodeOnceWithUniqueIndices(sim, 3);
}

TEST(CdFaultsIntegrationTest, StandbyControllerFinishesWhenTheLeaderIsKilledMidFormation) {
  SimOptions o = Options(6);
  o.clique_size = 3;  // two cliques
  o.controllers = 2;
  SimDomain sim(o);
  {
    absl::Status begun = sim.Begin();
    ASSERT_TRUE(begun.ok()) << begun;
  }
  auto leader = sim.LeaderController();
  ASSERT_TRUE(leader.ok()) << leader.status();
  // Mid-formation: daemons started, the domain not Ready yet.
  auto cd = sim.client().Get(k8s::ComputeDomain::kResource, sim.domain_namespace(), "bench-domain");
  ASSERT_TRUE(cd.ok());
  EXPECT_NE(cd->value("status", nlohmann::json::object()).value("status", ""), "Ready");
  sim.KillController(*leader);

  absl::Status s = sim.WaitReady(6, kConverge);
  EXPECT_TRUE(s.ok()) << s;
  auto next = sim.LeaderController();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(*next, *leader);
  ExpectEachNodeOnceWithUniqueIndices(sim, 6);
}

TEST(CdFaultsIntegrationTest, ApiServerRestartMidFormationLosesNoRegistration) {
  SimOptions o = Options(6);
  o.clique_size = 3;
  SimDomain sim(o);
  {
    absl::Status begun = sim.Begin();
    ASSERT_TRUE(begun.ok()) << begun;
  }
  // Restart as soon as the first entry is in (the others register across the restart).
  const absl::Time deadline = absl::Now() + kConverge;
  while (absl::Now() < deadline) {
    auto c = sim.Cliques();
    if (c.ok() && !c->empty()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(dra::testing::RestartApiServer("cd-faults-apiserver-restart.log"), 0)
      << "see " << dra::testing::ClusterDir() << "/logs/cd-faults-apiserver-restart.log";
  absl::Status s = sim.WaitReady(6, absl::Seconds(150));
  EXPECT_TRUE(s.ok()) << s;
  ExpectEachNodeOnceWithUniqueIndices(sim, 6);
}

// ComputeDomains created and deleted in a loop, each with a clique as its daemons would write it
// and half of them deleted before the controller finished setting them up: nothing of theirs is
// left (DaemonSet, ResourceClaimTemplates, cliques, the domains and so their finalizers).
TEST(CdFaultsIntegrationTest, ChurnLeavesNothingBehind) {
  int iterations = 10;
  if (const char* e = std::getenv("DRA_CD_CHURN_ITERATIONS"); e != nullptr && *e != '\0') {
    iterations = std::atoi(e);
  }
  SimDomain sim(Options(0));
  {
    absl::Status begun = sim.Begin();
    ASSERT_TRUE(begun.ok()) << begun;
  }
  k8s::Client& c = sim.client();
  std::set<std::string> uids;
  for (int i = 0; i < iterations; ++i) {
    const std::string name = absl::StrCat("churn-", i);
    nlohmann::json cd = {
        {"apiVersion", "resource.nvidia.com/v1beta1"},
        {"kind", "ComputeDomain"},
        {"metadata", {{"name", name}, {"namespace", sim.domain_namespace()}}},
        {"spec",
         {{"numNodes", 1},
          {"channel", {{"resourceClaimTemplate", {{"name", name + "-channel"}}}}}}}};
    auto made = c.Create(k8s::ComputeDomain::kResource, sim.domain_namespace(), cd);
    ASSERT_TRUE(made.ok()) << made.status();
    const std::string uid = (*made)["metadata"]["uid"];
    uids.insert(uid);
    if (i % 2 == 0) {
      // Let the controller set it up first: its finalizer and DaemonSet.
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      while (absl::Now() < deadline) {
        auto ds = c.List(k8s::DaemonSet::kResource, sim.driver_namespace(),
                         {.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", uid)});
        if (ds.ok() && !(*ds)["items"].empty()) break;
        absl::SleepFor(absl::Milliseconds(50));
      }
    }
    if (i % 2 != 0) {
      // Deleted before the controller may have seen it: no DaemonSet, so no daemon could have
      // registered a clique (a clique exists only once a daemon of the domain runs).
      ASSERT_TRUE(c.Delete(k8s::ComputeDomain::kResource, sim.domain_namespace(), name).ok());
      continue;
    }
    // A clique as a daemon of the set-up domain would have registered it (without the owner
    // reference to its pod, so only the controller's deletion removes it).
    nlohmann::json clique = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                             {"kind", "ComputeDomainClique"},
                             {"metadata",
                              {{"name", k8s::CliqueObjectName(uid, "churn.0")},
                               {"namespace", sim.driver_namespace()},
                               {"labels",
                                {{std::string(k8s::kComputeDomainLabel), uid},
                                 {std::string(k8s::kComputeDomainCliqueLabel), "churn.0"}}}}},
                             {"daemons",
                              {{{"nodeName", "churn-node"},
                                {"ipAddress", "10.9.9.9"},
                                {"cliqueID", "churn.0"},
                                {"index", 0}}}}};
    ASSERT_TRUE(c.Create(k8s::ComputeDomainClique::kResource, sim.driver_namespace(), clique).ok());
    ASSERT_TRUE(c.Delete(k8s::ComputeDomain::kResource, sim.domain_namespace(), name).ok());
  }
  // Everything of theirs goes away.
  auto leftovers = [&]() -> std::string {
    std::string out;
    for (const std::string& uid : uids) {
      k8s::ListOptions sel{.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", uid)};
      for (const auto* r : {&k8s::DaemonSet::kResource, &k8s::ResourceClaimTemplate::kResource,
                            &k8s::ComputeDomainClique::kResource}) {
        for (const std::string& ns : {sim.driver_namespace(), sim.domain_namespace()}) {
          auto l = c.List(*r, ns, sel);
          if (!l.ok()) return std::string(l.status().message());
          for (const auto& item : (*l)["items"]) {
            absl::StrAppend(&out, r->kind, " ", ns, "/", item["metadata"].value("name", ""), " ");
          }
        }
      }
    }
    auto cds = c.List(k8s::ComputeDomain::kResource, sim.domain_namespace());
    if (!cds.ok()) return std::string(cds.status().message());
    for (const auto& item : (*cds)["items"]) {
      const std::string name = item["metadata"].value("name", "");
      if (name != "bench-domain") absl::StrAppend(&out, "ComputeDomain ", name, " ");
    }
    return out;
  };
  const absl::Time deadline =
      absl::Now() + absl::Seconds(60) + absl::Milliseconds(200) * iterations;
  std::string left = leftovers();
  while (!left.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(250));
    left = leftovers();
  }
  EXPECT_EQ(left, "") << "left behind after " << iterations << " create/delete cycles";
}

}  // namespace
}  // namespace dra::bench
