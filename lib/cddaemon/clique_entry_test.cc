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

}  // namespace
}  // namespace dra::cddaemon
