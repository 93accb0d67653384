// Many CliqueRegistrars (one per simulated node, in one process) writing one ComputeDomainClique
// on the local API server at once: optimistic concurrency with backoff must give every daemon a
// distinct index, the daemon past maxNodesPerIMEXDomain must stay out, and every entry must go
// at Stop.

#include <unistd.h>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "lib/cddaemon/clique_registrar.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/rest_config.h"
#include "test/support/cluster_env.h"

namespace dra::cddaemon {
namespace {

constexpr k8s::ResourceInfo kNamespace{"", "v1", "Namespace", "namespaces", false};

TEST(CliqueRegistrarIntegrationTest, ConcurrentDaemonsGetDistinctIndicesAndLeave) {
  auto rest = k8s::LoadKubeconfig(testing::AdminKubeconfig());
  ASSERT_TRUE(rest.ok()) << rest.status();
  k8s::ClientOptions co;
  co.qps = 0;  // many writers on purpose
  auto client = k8s::Client::Create(*rest, co);
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937 rng(std::random_device{}());
  const std::string suffix = absl::StrFormat("%06x", rng() & 0xffffff);
  const std::string ns = absl::StrCat("cdd-reg-", suffix);
  constexpr int kMax = 6;
  ASSERT_TRUE((*client)->Create(kNamespace, "", {{"metadata", {{"name", ns}}}}).ok());
  // Runs on every exit, also after a failed ASSERT. No kubelet runs the pods: force-delete them.
  absl::Cleanup cleanup = [&] {
    k8s::DeleteOptions now;
    now.grace_period_seconds = 0;
    for (int i = 0; i <= kMax; ++i) {
      (void)(*client)->Delete(k8s::Pod::kResource, ns, absl::StrCat("pod-", i), now);
    }
    (void)(*client)->Delete(kNamespace, "", ns);
  };
  const std::string cd_uid = absl::StrCat("00000000-0000-4000-8000-000000", suffix);
  const std::string clique_id = "cluster.3";

  absl::Mutex mu;
  std::vector<int> callbacks(kMax + 1, 0);
  std::vector<std::unique_ptr<CliqueRegistrar>> daemons;
  // Real pods as owners: with owner references to pods that do not exist, the garbage collector
  // would delete the clique (the daemons would then re-create it, which is no test of indices).
  std::vector<std::string> pod_uids;
  for (int i = 0; i <= kMax; ++i) {
    nlohmann::json pod = {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", {{"name", absl::StrCat("pod-", i)}, {"namespace", ns}}},
                          {"spec",
                           {{"nodeName", absl::StrCat("cdd-reg-node-", suffix, "-", i)},
                            {"containers", {{{"name", "c"}, {"image", "none"}}}}}}};
    auto out = (*client)->Create(k8s::Pod::kResource, ns, pod);
    ASSERT_TRUE(out.ok()) << out.status();
    pod_uids.push_back((*out)["metadata"]["uid"]);
  }
  for (int i = 0; i <= kMax; ++i) {  // one more than there are indices
    CliqueRegistrarOptions o{.namespace_name = ns,
                             .compute_domain_uid = cd_uid,
                             .me = {.node_name = absl::StrCat("node-", i),
                                    .pod_ip = absl::StrCat("10.0.0.", i + 1),
                                    .pod_name = absl::StrCat("pod-", i),
                                    .pod_uid = pod_uids[i],
                                    .clique_id = clique_id,
                                    .max_nodes = kMax}};
    daemons.push_back(std::make_unique<CliqueRegistrar>(
        client->get(), o, [&, i](const std::vector<k8s::ComputeDomainDaemonInfo>&) {
          absl::MutexLock lock(&mu);
          ++callbacks[i];
          return absl::OkStatus();
        }));
  }
  // The last one starts after the others hold every index.
  for (int i = 0; i < kMax; ++i) daemons[i]->Start();

  auto read = [&]() -> absl::StatusOr<k8s::ComputeDomainClique> {
    auto j = (*client)->Get(k8s::ComputeDomainClique::kResource, ns,
                            k8s::CliqueObjectName(cd_uid, clique_id));
    if (!j.ok()) return j.status();
    return k8s::ComputeDomainClique::FromJson(*j);
  };
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<k8s::ComputeDomainClique> c;
  while (absl::Now() < deadline) {
    // Two daemons appending at once may write the same index; the later one moves (list order
    // decides), so wait until every entry holds the index it is entitled to.
    c = read();
    if (c.ok() && c->daemons.size() == kMax && k8s::SettledDaemons(c->daemons).size() == kMax) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->daemons.size(), static_cast<size_t>(kMax));
  ASSERT_EQ(k8s::SettledDaemons(c->daemons).size(), static_cast<size_t>(kMax));
  std::set<int64_t> indices;
  for (const auto& d : c->daemons) indices.insert(d.index);
  EXPECT_EQ(indices, (std::set<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(c->metadata.owner_references.size(), static_cast<size_t>(kMax));

  daemons[kMax]->Start();
  absl::SleepFor(absl::Seconds(2));
  c = read();
  ASSERT_TRUE(c.ok());
  // node-6 may have appended an entry, but it is entitled to no index below the maximum: it is
  // nobody's peer (not settled) and its daemon was never told of peers.
  std::vector<k8s::ComputeDomainDaemonInfo> settled = k8s::SettledDaemons(c->daemons);
  EXPECT_EQ(settled.size(), static_cast<size_t>(kMax)) << "no index is left for node-6";
  for (const auto& d : settled) EXPECT_NE(d.node_name, "node-6");
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(callbacks[kMax], 0);
  }

  // One leaves: the waiting daemon gets the freed index.
  int64_t freed = -1;
  for (const auto& d : c->daemons) {
    if (d.node_name == "node-2") freed = d.index;
  }
  ASSERT_GE(freed, 0);
  ASSERT_TRUE(daemons[2]->Stop(absl::Seconds(10)).ok());
  deadline = absl::Now() + absl::Seconds(30);
  bool joined = false;
  while (absl::Now() < deadline && !joined) {
    c = read();
    if (c.ok()) {
      for (const auto& d : c->daemons) {
        if (d.node_name == "node-6") joined = d.index == freed;
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(joined) << "node-6 takes the index node-2 freed; clique: "
                      << (c.ok() ? c->ToJson().dump() : c.status().ToString());

  for (auto& d : daemons) EXPECT_TRUE(d->Stop(absl::Seconds(10)).ok());
  c = read();
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->daemons.empty());
}

}  // namespace
}  // namespace dra::cddaemon
