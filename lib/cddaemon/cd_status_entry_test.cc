#include "lib/cddaemon/cd_status_entry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cddaemon {
namespace {

using ::testing::HasSubstr;

k8s::ComputeDomainNode Node(std::string name, std::string clique, int64_t index) {
  k8s::ComputeDomainNode n;
  n.name = std::move(name);
  n.clique_id = std::move(clique);
  n.index = index;
  n.ip_address = "10.2.0." + std::to_string(index);
  return n;
}

DaemonIdentity Me(const std::string& node, std::string clique, int max_nodes = 2) {
  return {.node_name = node,
          .pod_ip = "10.9.9.9",
          .clique_id = std::move(clique),
          .max_nodes = max_nodes};
}

TEST(NextFreeNodeIndexTest, PerClique) {
  std::vector<k8s::ComputeDomainNode> nodes = {Node("a", "c1", 0), Node("b", "c2", 0),
                                               Node("c", "c1", 1)};
  EXPECT_EQ(*NextFreeNodeIndex(nodes, "c2", 4), 1);
  EXPECT_EQ(*NextFreeNodeIndex(nodes, "c3", 4), 0);
  absl::StatusOr<int64_t> full = NextFreeNodeIndex(nodes, "c1", 2);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().message(), "no available indices within maxNodesPerIMEXDomain (2)");
  // No limit without a clique ID.
  std::vector<k8s::ComputeDomainNode> plain = {Node("x", "", 0), Node("y", "", 1)};
  EXPECT_EQ(*NextFreeNodeIndex(plain, "", 1), 2);
}

TEST(UpsertOwnNodeTest, InsertUpdateIpKeepIndexStatusRemove) {
  k8s::ComputeDomain cd;
  cd.metadata.namespace_name = "ns";
  cd.metadata.name = "cd";
  cd.status.nodes = {Node("other", "c1", 0)};
  ASSERT_TRUE(*UpsertOwnNode(cd, Me("me", "c1")));
  ASSERT_EQ(cd.status.nodes.size(), 2u);
  EXPECT_EQ(cd.status.nodes[1].index, 1);
  EXPECT_EQ(cd.status.nodes[1].status, "NotReady");
  EXPECT_FALSE(*UpsertOwnNode(cd, Me("me", "c1")));
  DaemonIdentity moved = Me("me", "c1");
  moved.pod_ip = "10.9.9.10";
  EXPECT_TRUE(*UpsertOwnNode(cd, moved));
  EXPECT_EQ(cd.status.nodes[1].index, 1);
  EXPECT_TRUE(*SetOwnNodeStatus(cd, "me", "Ready"));
  EXPECT_THAT(SetOwnNodeStatus(cd, "ghost", "Ready").status().message(),
              HasSubstr("waiting for insertion"));
  EXPECT_TRUE(RemoveOwnNodes(cd, "10.9.9.10"));
  EXPECT_EQ(cd.status.nodes.size(), 1u);
}

TEST(UpsertOwnNodeTest, ExhaustionNamesTheComputeDomain) {
  k8s::ComputeDomain cd;
  cd.metadata.namespace_name = "ns";
  cd.metadata.name = "cd";
  cd.status.nodes = {Node("a", "c1", 0)};
  absl::StatusOr<bool> r = UpsertOwnNode(cd, Me("me", "c1", 1));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ComputeDomain ns/cd"));
}

TEST(SameCliqueDaemonsTest, FiltersAndKeepsOrder) {
  std::vector<k8s::ComputeDomainDaemonInfo> d =
      SameCliqueDaemons({Node("b", "c1", 1), Node("x", "c2", 0), Node("a", "c1", 0)}, "c1");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].node_name, "b");
  EXPECT_EQ(d[1].node_name, "a");
  EXPECT_EQ(d[1].ip_address, "10.2.0.0");
}

}  // namespace
}  // namespace dra::cddaemon
