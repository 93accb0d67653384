#include "lib/cddaemon/clique_entry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cddaemon {
namespace {

using ::testing::HasSubstr;

DaemonIdentity Me(const std::string& node, std::string ip, int max_nodes = 18) {
  return {.node_name = node,
          .pod_ip = std::move(ip),
          .pod_name = "daemon-" + node,
          .pod_uid = "uid-" + node,
          .clique_id = "cluster.1",
          .max_nodes = max_nodes};
}

k8s::ComputeDomainDaemonInfo Entry(std::string node, int64_t index) {
  k8s::ComputeDomainDaemonInfo d;
  d.node_name = std::move(node);
  d.ip_address = "10.1.1." + std::to_string(index);
  d.clique_id = "cluster.1";
  d.index = index;
  return d;
}

TEST(NextFreeIndexTest, SmallestUnusedIncludingGaps) {
  k8s::ComputeDomainClique c;
  EXPECT_EQ(*NextFreeIndex(c, 4), 0);
  c.daemons = {Entry("a", 0), Entry("b", 2)};
  EXPECT_EQ(*NextFreeIndex(c, 4), 1);
  c.daemons.push_back(Entry("c", 1));
  EXPECT_EQ(*NextFreeIndex(c, 4), 3);
}

TEST(NextFreeIndexTest, ExhaustionError) {
  k8s::ComputeDomainClique c;
  c.daemons = {Entry("a", 0), Entry("b", 1)};
  absl::StatusOr<int64_t> i = NextFreeIndex(c, 2);
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(i.status().message(), "no available indices within maxNodesPerIMEXDomain (2)");
}

TEST(UpsertOwnEntryTest, NewEntryGetsNextIndexNotReadyAndOwnerRef) {
  k8s::ComputeDomainClique c = NewClique("drv", "cd-uid", Me("n1", "10.0.0.1"));
  c.daemons = {Entry("other", 0)};
  ASSERT_TRUE(*UpsertOwnEntry(c, Me("n1", "10.0.0.1")));
  ASSERT_EQ(c.daemons.size(), 2u);
  EXPECT_EQ(c.daemons[1].node_name, "n1");
  EXPECT_EQ(c.daemons[1].ip_address, "10.0.0.1");
  EXPECT_EQ(c.daemons[1].index, 1);
  EXPECT_EQ(c.daemons[1].status, "NotReady");
  EXPECT_EQ(c.daemons[1].clique_id, "cluster.1");
  ASSERT_EQ(c.metadata.owner_references.size(), 1u);
  EXPECT_EQ(c.metadata.owner_references[0].kind, "Pod");
  EXPECT_EQ(c.metadata.owner_references[0].uid, "uid-n1");
  EXPECT_FALSE(c.metadata.owner_references[0].controller.has_value());
  // Second time: nothing changes.
  EXPECT_FALSE(*UpsertOwnEntry(c, Me("n1", "10.0.0.1")));
}

TEST(UpsertOwnEntryTest, IpChangeKeepsIndexAndAddsNewPodOwner) {
  k8s::ComputeDomainClique c;
  c.metadata.name = "cd.cluster.1";
  ASSERT_TRUE(*UpsertOwnEntry(c, Me("a", "10.0.0.1")));
  ASSERT_TRUE(*UpsertOwnEntry(c, Me("b", "10.0.0.2")));
  DaemonIdentity recreated = Me("a", "10.0.0.99");
  recreated.pod_uid = "uid-a-2";
  ASSERT_TRUE(*UpsertOwnEntry(c, recreated));
  ASSERT_EQ(c.daemons.size(), 2u);
  EXPECT_EQ(c.daemons[0].node_name, "a");
  EXPECT_EQ(c.daemons[0].index, 0);
  EXPECT_EQ(c.daemons[0].ip_address, "10.0.0.99");
  EXPECT_EQ(c.metadata.owner_references.size(), 3u);
}

TEST(UpsertOwnEntryTest, ExhaustionNamesTheClique) {
  k8s::ComputeDomainClique c;
  c.metadata.name = "cd.cluster.1";
  c.daemons = {Entry("x", 0)};
  absl::StatusOr<bool> r = UpsertOwnEntry(c, Me("n", "1.1.1.1", 1));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cd.cluster.1"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("no available indices within maxNodesPerIMEXDomain (1)"));
  EXPECT_EQ(c.daemons.size(), 1u);
}

TEST(SetOwnStatusTest, ChangesOnlyOwnEntry) {
  k8s::ComputeDomainClique c;
  c.metadata.name = "cd.cluster.1";
  c.daemons = {Entry("a", 0), Entry("b", 1)};
  absl::StatusOr<bool> r = SetOwnStatus(c, "missing", "Ready");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("waiting for insertion"));
  EXPECT_TRUE(*SetOwnStatus(c, "b", "Ready"));
  EXPECT_FALSE(*SetOwnStatus(c, "b", "Ready"));
  EXPECT_EQ(c.daemons[0].status, "");
  EXPECT_EQ(c.daemons[1].status, "Ready");
}

TEST(RemoveOwnEntriesTest, ByIp) {
  k8s::ComputeDomainClique c;
  c.daemons = {Entry("a", 0), Entry("b", 1)};
  EXPECT_FALSE(RemoveOwnEntries(c, "10.9.9.9"));
  EXPECT_TRUE(RemoveOwnEntries(c, "10.1.1.0"));
  ASSERT_EQ(c.daemons.size(), 1u);
  EXPECT_EQ(c.daemons[0].node_name, "b");
}

TEST(NewCliqueTest, NameAndLabels) {
  k8s::ComputeDomainClique c = NewClique("drv", "uid-1", Me("n", "1.1.1.1"));
  EXPECT_EQ(c.metadata.name, "uid-1.cluster.1");
  EXPECT_EQ(c.metadata.namespace_name, "drv");
  EXPECT_EQ(c.metadata.labels.at("resource.nvidia.com/computeDomain"), "uid-1");
  EXPECT_EQ(c.metadata.labels.at("resource.nvidia.com/computeDomain.cliqueID"), "cluster.1");
}

// --- Patches without a resourceVersion precondition ---

k8s::ComputeDomainClique Seen(std::vector<k8s::ComputeDomainDaemonInfo> daemons) {
  k8s::ComputeDomainClique c;
  c.metadata.name = "uid.cluster.1";
  c.metadata.resource_version = "42";
  c.daemons = std::move(daemons);
  c.raw = c.ToJson();
  c.raw["metadata"]["ownerReferences"] = nlohmann::json::array();
  return c;
}

TEST(ResolvedIndicesTest, LaterDuplicateMovesToTheSmallestIndexNoEarlierEntryHolds) {
  std::vector<k8s::ComputeDomainDaemonInfo> d = {Entry("a", 0), Entry("b", 0), Entry("c", 1),
                                                 Entry("d", 0)};
  d.push_back(Entry("e", 7));
  d.back().index = -1;
  // b loses 0 and takes 1 (c then loses 1 and takes 2), d takes 3, e (negative) takes 4.
  EXPECT_EQ(k8s::ResolvedIndices(d), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  std::vector<k8s::ComputeDomainDaemonInfo> settled = k8s::SettledDaemons(d);
  ASSERT_EQ(settled.size(), 1u);
  EXPECT_EQ(settled[0].node_name, "a");
}

TEST(ResolvedIndicesTest, AnEntryKeepsItsResultWhenEarlierOnesMoveOrLeave) {
  std::vector<k8s::ComputeDomainDaemonInfo> d = {Entry("a", 0), Entry("b", 0), Entry("c", 0)};
  std::vector<int64_t> first = k8s::ResolvedIndices(d);
  d[1].index = first[1];  // b moved
  EXPECT_EQ(k8s::ResolvedIndices(d), first);
  d[2].index = first[2];  // c moved: everything settled
  EXPECT_EQ(k8s::SettledDaemons(d).size(), 3u);
  d.erase(d.begin());  // a left: b and c keep theirs
  EXPECT_EQ(k8s::ResolvedIndices(d), (std::vector<int64_t>{first[1], first[2]}));
}

TEST(OwnEntryPatchTest, NewEntryIsAppendedWithTheSmallestFreeIndexAndTheOwnerReference) {
  k8s::ComputeDomainClique c = Seen({Entry("a", 0), Entry("b", 2)});
  absl::StatusOr<nlohmann::json> ops = OwnEntryPatch(c, Me("n", "10.0.0.9"), {});
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u) << ops->dump();
  EXPECT_EQ((*ops)[0]["op"], "add");
  EXPECT_EQ((*ops)[0]["path"], "/daemons/-");
  EXPECT_EQ((*ops)[0]["value"]["index"], 1);
  EXPECT_EQ((*ops)[0]["value"]["status"], "NotReady");
  EXPECT_EQ((*ops)[0]["value"]["ipAddress"], "10.0.0.9");
  EXPECT_EQ((*ops)[1]["path"], "/metadata/ownerReferences/-");
  EXPECT_EQ((*ops)[1]["value"]["uid"], "uid-n");
}

TEST(OwnEntryPatchTest, PreferredIndexIsTakenWhenFree) {
  k8s::ComputeDomainClique c = Seen({Entry("a", 0)});
  auto ops = OwnEntryPatch(c, Me("n", "10.0.0.9"), {.preferred_index = 5});
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ((*ops)[0]["value"]["index"], 5);
  ops = OwnEntryPatch(c, Me("n", "10.0.0.9"), {.preferred_index = 0});  // taken by a
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ((*ops)[0]["value"]["index"], 1);
}

TEST(OwnEntryPatchTest, ExistingEntryIsReplacedAtItsTestedPositionWithItsResolvedIndex) {
  k8s::ComputeDomainClique c = Seen({Entry("a", 0), Entry("n", 0)});
  c.daemons[1].ip_address = "10.0.0.9";
  c.metadata.owner_references.push_back(
      {.api_version = "v1", .kind = "Pod", .name = "daemon-n", .uid = "uid-n"});
  auto ops = OwnEntryPatch(c, Me("n", "10.0.0.9"), {.status = "Ready"});
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u) << ops->dump();
  EXPECT_EQ((*ops)[0],
            (nlohmann::json{{"op", "test"}, {"path", "/daemons/1/nodeName"}, {"value", "n"}}));
  EXPECT_EQ((*ops)[1]["op"], "replace");
  EXPECT_EQ((*ops)[1]["path"], "/daemons/1");
  EXPECT_EQ((*ops)[1]["value"]["index"], 1);
  EXPECT_EQ((*ops)[1]["value"]["status"], "Ready");
  // Settled and as wished: nothing to send.
  c.daemons[1].index = 1;
  c.daemons[1].status = "Ready";
  ops = OwnEntryPatch(c, Me("n", "10.0.0.9"), {.status = "Ready"});
  ASSERT_TRUE(ops.ok());
  EXPECT_TRUE(ops->empty()) << ops->dump();
}

TEST(OwnEntryPatchTest, MissingListsAreGuardedByTheResourceVersion) {
  k8s::ComputeDomainClique c;
  c.metadata.name = "uid.cluster.1";
  c.metadata.resource_version = "42";
  c.raw = nlohmann::json{{"metadata", {{"name", "uid.cluster.1"}}}};
  auto ops = OwnEntryPatch(c, Me("n", "10.0.0.9"), {});
  ASSERT_TRUE(ops.ok());
  ASSERT_EQ(ops->size(), 3u) << ops->dump();
  EXPECT_EQ(
      (*ops)[0],
      (nlohmann::json{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", "42"}}));
  EXPECT_EQ((*ops)[1]["path"], "/daemons");
  EXPECT_EQ((*ops)[2]["path"], "/metadata/ownerReferences");
}

TEST(OwnEntryPatchTest, NoFreeIndexIsExhaustion) {
  k8s::ComputeDomainClique c = Seen({Entry("a", 0), Entry("b", 1)});
  auto ops = OwnEntryPatch(c, Me("n", "10.0.0.9", 2), {});
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(ops.status().message(), HasSubstr("no available indices within"));
  // An entry appended at once with an index another holds, and no free one left.
  c = Seen({Entry("a", 0), Entry("n", 0)});
  ops = OwnEntryPatch(c, Me("n", "10.0.0.9", 1), {});
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(RemoveOwnEntriesPatchTest, EachRemovalIsGuardedByItsIpHighestPositionFirst) {
  k8s::ComputeDomainClique c = Seen({Entry("a", 0), Entry("b", 1), Entry("c", 2)});
  c.daemons[0].ip_address = "10.0.0.9";
  c.daemons[2].ip_address = "10.0.0.9";
  nlohmann::json ops = RemoveOwnEntriesPatch(c, "10.0.0.9");
  ASSERT_EQ(ops.size(), 4u) << ops.dump();
  EXPECT_EQ(ops[0]["path"], "/daemons/2/ipAddress");
  EXPECT_EQ(ops[1], (nlohmann::json{{"op", "remove"}, {"path", "/daemons/2"}}));
  EXPECT_EQ(ops[2]["path"], "/daemons/0/ipAddress");
  EXPECT_EQ(ops[3]["path"], "/daemons/0");
  EXPECT_TRUE(RemoveOwnEntriesPatch(c, "10.9.9.9").empty());
}

TEST(NewCliqueWithOwnEntryTest, OnlyOwnEntryLabelsAndOwnerReference) {
  nlohmann::json cfg = NewCliqueWithOwnEntry("drv", "cd-uid", Me("n", "10.0.0.9"),
                                             {.status = "NotReady", .preferred_index = 3});
  EXPECT_EQ(cfg["kind"], "ComputeDomainClique");
  EXPECT_EQ(cfg["metadata"]["name"], "cd-uid.cluster.1");
  EXPECT_EQ(cfg["metadata"]["labels"]["resource.nvidia.com/computeDomain"], "cd-uid");
  EXPECT_EQ(cfg["metadata"]["ownerReferences"][0]["uid"], "uid-n");
  EXPECT_FALSE(cfg["metadata"].contains("resourceVersion"));
  ASSERT_EQ(cfg["daemons"].size(), 1u);
  EXPECT_EQ(cfg["daemons"][0]["index"], 3);
}

}  // namespace
}  // namespace dra::cddaemon
