#include "lib/cdcontroller/status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cdcontroller {
namespace {

using k8s::ComputeDomainClique;
using k8s::ComputeDomainDaemonInfo;
using k8s::ComputeDomainNode;

ComputeDomainDaemonInfo Daemon(const std::string& node, const std::string& ip,
                               const std::string& clique, int64_t index,
                               const std::string& status) {
  ComputeDomainDaemonInfo d;
  d.node_name = node;
  d.ip_address = ip;
  d.clique_id = clique;
  d.index = index;
  d.status = status;
  return d;
}

ComputeDomainClique Clique(const std::string& name, std::vector<ComputeDomainDaemonInfo> d) {
  ComputeDomainClique c;
  c.metadata.name = name;
  c.daemons = std::move(d);
  return c;
}

DaemonPod Pod(const std::string& node, const std::string& ip, bool ready, bool labelled = true,
              const std::string& clique = "") {
  return {.cd_uid = "uid",
          .has_clique_label = labelled,
          .clique_id = clique,
          .node_name = node,
          .pod_ip = ip,
          .ready = ready,
          .terminating = false};
}

ComputeDomainNode Node(const std::string& name, const std::string& ip, const std::string& clique,
                       int64_t index, const std::string& status) {
  ComputeDomainNode n;
  n.name = name;
  n.ip_address = ip;
  n.clique_id = clique;
  n.index = index;
  n.status = status;
  return n;
}

TEST(DaemonPodTest, FromPodReadsLabelsIpAndReadiness) {
  auto pod = k8s::Pod::FromJson(nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "d", "labels": {
      "resource.nvidia.com/computeDomain": "uid-1",
      "resource.nvidia.com/computeDomain.cliqueID": ""}},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    "status": {"podIP": "10.0.0.7", "conditions": [
      {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}
  })"));
  ASSERT_TRUE(pod.ok()) << pod.status();
  DaemonPod d = DaemonPodFromPod(*pod);
  EXPECT_EQ(d.cd_uid, "uid-1");
  EXPECT_TRUE(d.has_clique_label);
  EXPECT_TRUE(d.non_fabric());
  EXPECT_EQ(d.node_name, "n1");
  EXPECT_EQ(d.pod_ip, "10.0.0.7");
  EXPECT_TRUE(d.ready);
  EXPECT_FALSE(d.terminating);
}

TEST(DaemonPodTest, FabricWhenCliqueLabelAbsentOrSet) {
  EXPECT_FALSE(Pod("n", "1.1.1.1", true, /*labelled=*/false).non_fabric());
  EXPECT_FALSE(Pod("n", "1.1.1.1", true, true, "uuid.1").non_fabric());
  EXPECT_TRUE(Pod("n", "1.1.1.1", true, true, "").non_fabric());
}

TEST(BuildNodesTest, AggregatesAllCliquesAndNonFabricPodsSortedByName) {
  ComputeDomainClique a = Clique("uid.a", {Daemon("n3", "10.0.0.3", "a", 1, "Ready"),
                                           Daemon("n1", "10.0.0.1", "a", 0, "Ready")});
  ComputeDomainClique b = Clique("uid.b", {Daemon("n2", "10.0.0.2", "b", 0, "NotReady")});
  std::vector<DaemonPod> pods = {
      Pod("n1", "10.0.0.1", true, true, "a"),  // fabric pod: its clique entry counts
      Pod("n4", "10.0.0.4", false),            // non-fabric, not ready
      Pod("n5", "10.0.0.5", true),             // non-fabric, ready
      Pod("", "10.0.0.6", true),               // not scheduled yet: skipped
      Pod("n7", "", true),                     // no IP yet: skipped
  };
  std::vector<ComputeDomainNode> nodes = BuildNodes({&b, &a}, pods);
  std::vector<ComputeDomainNode> want = {
      Node("n1", "10.0.0.1", "a", 0, "Ready"), Node("n2", "10.0.0.2", "b", 0, "NotReady"),
      Node("n3", "10.0.0.3", "a", 1, "Ready"), Node("n4", "10.0.0.4", "", -1, "NotReady"),
      Node("n5", "10.0.0.5", "", -1, "Ready"),
  };
  EXPECT_EQ(nodes, want);
}

TEST(BuildNodesTest, ANodeListedTwiceKeepsTheFirstCliqueEntry) {
  ComputeDomainClique a = Clique("uid.a", {Daemon("n1", "10.0.0.1", "a", 0, "Ready")});
  ComputeDomainClique b = Clique("uid.b", {Daemon("n1", "10.0.0.9", "b", 3, "NotReady")});
  std::vector<ComputeDomainNode> nodes = BuildNodes({&b, &a}, {Pod("n1", "10.0.0.8", true)});
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0], Node("n1", "10.0.0.1", "a", 0, "Ready"));
}

TEST(BuildNodesTest, NodeWithANotReadyDaemonPodIsNotReadyWhateverItsEntrySays) {
  ComputeDomainClique a = Clique("uid.a", {Daemon("n1", "10.0.0.1", "a", 0, "Ready"),
                                           Daemon("n2", "10.0.0.2", "a", 1, "Ready")});
  std::vector<ComputeDomainNode> nodes =
      BuildNodes({&a}, {Pod("n1", "10.0.0.1", false, true, "a"),  // daemon died
                        Pod("n2", "10.0.0.2", true, true, "a")});
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].status, "NotReady");
  EXPECT_EQ(nodes[1].status, "Ready");
}

TEST(BuildNodesTest, EntryOnAnIndexAnEarlierEntryHoldsIsNotListedYet) {
  ComputeDomainClique a = Clique("uid.a", {Daemon("n1", "10.0.0.1", "a", 0, "Ready"),
                                           Daemon("n2", "10.0.0.2", "a", 0, "NotReady")});
  std::vector<ComputeDomainNode> nodes = BuildNodes({&a}, {});
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, "n1");
}

TEST(GlobalStatusTest, Table) {
  const std::vector<ComputeDomainNode> ready2 = {Node("a", "1", "c", 0, "Ready"),
                                                 Node("b", "2", "c", 1, "Ready")};
  const std::vector<ComputeDomainNode> one_not_ready = {Node("a", "1", "c", 0, "Ready"),
                                                        Node("b", "2", "c", 1, "NotReady")};
  const std::vector<ComputeDomainNode> empty_status = {Node("a", "1", "c", 0, "")};
  struct Case {
    int64_t num_nodes;
    std::vector<ComputeDomainNode> nodes;
    bool host;
    std::string want;
  } cases[] = {
      {0, {}, false, "Ready"},  // numNodes 0 and nothing NotReady
      {2, ready2, false, "Ready"},
      {3, ready2, false, "NotReady"},  // fewer nodes than numNodes
      {0, one_not_ready, false, "NotReady"},
      {0, empty_status, false, "Ready"},  // empty status is not NotReady
      {5, one_not_ready, true, "Ready"},  // hostManaged: always Ready
  };
  for (const Case& c : cases) {
    EXPECT_EQ(GlobalStatus(c.num_nodes, c.nodes, c.host), c.want)
        << "numNodes=" << c.num_nodes << " nodes=" << c.nodes.size() << " host=" << c.host;
  }
}

TEST(SameNodesTest, ComparesAsMapsByName) {
  std::vector<ComputeDomainNode> a = {Node("a", "1", "c", 0, "Ready"),
                                      Node("b", "2", "c", 1, "Ready")};
  std::vector<ComputeDomainNode> b = {a[1], a[0]};
  EXPECT_TRUE(SameNodes(a, b));
  b[0].status = "NotReady";
  EXPECT_FALSE(SameNodes(a, b));
  EXPECT_FALSE(SameNodes(a, {a[0]}));
  EXPECT_TRUE(SameNodes({}, {}));
  b = {a[0], a[0]};  // same size, a name missing
  EXPECT_FALSE(SameNodes(b, a));
}

}  // namespace
}  // namespace dra::cdcontroller
