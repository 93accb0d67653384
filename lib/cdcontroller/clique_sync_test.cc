#include "lib/cdcontroller/clique_sync.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cdcontroller {
namespace {

using k8s::ComputeDomainDaemonInfo;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

DaemonPod Pod(const std::string& node, const std::string& ip, bool ready,
              const std::string& clique = "c1", bool terminating = false) {
  return {.cd_uid = "uid",
          .has_clique_label = true,
          .clique_id = clique,
          .node_name = node,
          .pod_ip = ip,
          .pod_name = "pod-" + node,
          .pod_uid = "u-" + node,
          .ready = ready,
          .terminating = terminating};
}

ComputeDomainDaemonInfo Entry(const std::string& node, int64_t index,
                              const std::string& ip = "10.0.0.1") {
  ComputeDomainDaemonInfo d;
  d.node_name = node;
  d.ip_address = ip;
  d.clique_id = "c1";
  d.index = index;
  d.status = "NotReady";
  return d;
}

std::vector<std::string> Summary(const CliqueDaemons& c) {
  std::vector<std::string> out;
  for (const auto& d : c.daemons) {
    out.push_back(d.node_name + "=" + std::to_string(d.index) + "/" + d.ip_address + "/" +
                  d.status + "/" + d.clique_id);
  }
  return out;
}

TEST(DesiredCliqueDaemonsTest, NewNodesGetSmallestIndicesInNameOrderWithPodReadiness) {
  std::vector<DaemonPod> pods = {Pod("n3", "10.0.0.3", true), Pod("n1", "10.0.0.1", false),
                                 Pod("n2", "10.0.0.2", true)};
  CliqueDaemons c = DesiredCliqueDaemons({}, pods, "c1", {}, 18);
  EXPECT_THAT(Summary(c), ElementsAre("n1=0/10.0.0.1/NotReady/c1", "n2=1/10.0.0.2/Ready/c1",
                                      "n3=2/10.0.0.3/Ready/c1"));
  ASSERT_EQ(c.pods.size(), 3u);
  EXPECT_EQ(c.pods[2]->pod_name, "pod-n3");
  EXPECT_THAT(c.unplaced, IsEmpty());
}

TEST(DesiredCliqueDaemonsTest, ExistingIndicesStayAndTheGapIsFilledFirst) {
  // n1 left (index 0 free); n2 keeps 1 with its new IP, n4 keeps 2, newcomer n0 takes 0.
  std::vector<ComputeDomainDaemonInfo> existing = {Entry("n1", 0), Entry("n2", 1), Entry("n4", 2)};
  std::vector<DaemonPod> pods = {Pod("n2", "10.0.9.2", false), Pod("n4", "10.0.0.4", false),
                                 Pod("n0", "10.0.0.9", false)};
  CliqueDaemons c = DesiredCliqueDaemons(existing, pods, "c1", {}, 18);
  EXPECT_THAT(Summary(c), ElementsAre("n0=0/10.0.0.9/NotReady/c1", "n2=1/10.0.9.2/NotReady/c1",
                                      "n4=2/10.0.0.4/NotReady/c1"));
  EXPECT_TRUE(RemovesNodes(existing, c.daemons));
  EXPECT_FALSE(RemovesNodes({Entry("n2", 1)}, c.daemons));
}

TEST(DesiredCliqueDaemonsTest, RememberedIndexComesBackAfterTheCliqueWasDeleted) {
  std::vector<DaemonPod> pods = {Pod("a", "10.0.0.1", true), Pod("b", "10.0.0.2", true),
                                 Pod("c", "10.0.0.3", true)};
  CliqueDaemons c = DesiredCliqueDaemons({}, pods, "c1", {{"c", 0}, {"a", 2}}, 18);
  EXPECT_THAT(Summary(c), ElementsAre("c=0/10.0.0.3/Ready/c1", "b=1/10.0.0.2/Ready/c1",
                                      "a=2/10.0.0.1/Ready/c1"));
}

TEST(DesiredCliqueDaemonsTest, ExistingEntryWinsOverARememberedClaimOnTheSameIndex) {
  CliqueDaemons c = DesiredCliqueDaemons({Entry("x", 0)},
                                         {Pod("x", "10.0.0.1", true), Pod("y", "10.0.0.2", true)},
                                         "c1", {{"y", 0}}, 18);
  EXPECT_THAT(Summary(c), ElementsAre("x=0/10.0.0.1/Ready/c1", "y=1/10.0.0.2/Ready/c1"));
}

TEST(DesiredCliqueDaemonsTest, DuplicateIndicesOfAnOlderListAreResolvedInListOrder) {
  // Written by daemons of an earlier version: two appended index 0 at once; the later one moves.
  std::vector<ComputeDomainDaemonInfo> existing = {Entry("b", 0), Entry("a", 0)};
  CliqueDaemons c = DesiredCliqueDaemons(
      existing, {Pod("a", "10.0.0.1", true), Pod("b", "10.0.0.2", true)}, "c1", {}, 18);
  EXPECT_THAT(Summary(c), ElementsAre("b=0/10.0.0.2/Ready/c1", "a=1/10.0.0.1/Ready/c1"));
}

TEST(DesiredCliqueDaemonsTest, SkipsOtherCliquesTerminatingAndIncompletePods) {
  DaemonPod unlabelled = Pod("u", "10.0.0.6", true);
  unlabelled.has_clique_label = false;
  unlabelled.clique_id = "";
  std::vector<DaemonPod> pods = {Pod("a", "10.0.0.1", true),
                                 Pod("b", "10.0.0.2", true, "c2"),
                                 Pod("c", "10.0.0.3", true, "c1", /*terminating=*/true),
                                 Pod("d", "", true),
                                 Pod("", "10.0.0.5", true),
                                 unlabelled};
  CliqueDaemons c = DesiredCliqueDaemons({Entry("c", 0)}, pods, "c1", {}, 18);
  EXPECT_THAT(Summary(c), ElementsAre("a=0/10.0.0.1/Ready/c1"));
  EXPECT_THAT(DesiredCliqueDaemons({}, pods, "", {}, 18).daemons, IsEmpty());
}

TEST(DesiredCliqueDaemonsTest, MoreNodesThanIndicesLeavesTheRestUnplaced) {
  std::vector<DaemonPod> pods = {Pod("a", "10.0.0.1", true), Pod("b", "10.0.0.2", true),
                                 Pod("c", "10.0.0.3", true)};
  CliqueDaemons c = DesiredCliqueDaemons({Entry("c", 1)}, pods, "c1", {}, 2);
  EXPECT_THAT(Summary(c), ElementsAre("a=0/10.0.0.1/Ready/c1", "c=1/10.0.0.3/Ready/c1"));
  EXPECT_THAT(c.unplaced, ElementsAre("b"));
  // An existing entry beyond max_nodes is not kept.
  CliqueDaemons d =
      DesiredCliqueDaemons({Entry("a", 5)}, {Pod("a", "10.0.0.1", true)}, "c1", {}, 2);
  EXPECT_THAT(Summary(d), ElementsAre("a=0/10.0.0.1/Ready/c1"));
}

TEST(CliqueObjectTest, NameLabelsDaemonsAndOwnerReferencesOfThePods) {
  k8s::ComputeDomainClique base;
  base.metadata.resource_version = "42";
  base.metadata.labels["keep"] = "me";
  k8s::OwnerReference other{
      .api_version = "apps/v1", .kind = "DaemonSet", .name = "ds", .uid = "d"};
  k8s::OwnerReference stale{.api_version = "v1", .kind = "Pod", .name = "gone", .uid = "g"};
  base.metadata.owner_references = {other, stale};
  std::vector<DaemonPod> pods = {Pod("b", "10.0.0.2", true), Pod("a", "10.0.0.1", false)};
  CliqueDaemons desired = DesiredCliqueDaemons({}, pods, "c1", {}, 18);
  k8s::ComputeDomainClique c = CliqueObject(base, "ns", "uid", "c1", desired);
  EXPECT_EQ(c.metadata.name, "uid.c1");
  EXPECT_EQ(c.metadata.namespace_name, "ns");
  EXPECT_EQ(c.metadata.resource_version, "42");
  EXPECT_EQ(c.metadata.labels.at(std::string(k8s::kComputeDomainLabel)), "uid");
  EXPECT_EQ(c.metadata.labels.at(std::string(k8s::kComputeDomainCliqueLabel)), "c1");
  EXPECT_EQ(c.metadata.labels.at("keep"), "me");
  ASSERT_EQ(c.metadata.owner_references.size(), 3u);
  EXPECT_EQ(c.metadata.owner_references[0].name, "ds");
  EXPECT_EQ(c.metadata.owner_references[1].name, "pod-a");
  EXPECT_EQ(c.metadata.owner_references[1].uid, "u-a");
  EXPECT_EQ(c.metadata.owner_references[2].name, "pod-b");
  EXPECT_TRUE(CliqueDiffers(base, c));
  EXPECT_FALSE(CliqueDiffers(c, c));
  k8s::ComputeDomainClique ready = c;
  ready.daemons[0].status = "Ready";
  EXPECT_TRUE(CliqueDiffers(c, ready));
}

}  // namespace
}  // namespace dra::cdcontroller
