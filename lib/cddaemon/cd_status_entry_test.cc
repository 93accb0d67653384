#include "lib/cddaemon/cd_status_entry.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cddaemon/cd_status_registrar.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"
#include "lib/k8s/client.h"
#include "test/support/canned_http_server.h"

namespace dra::cddaemon {
namespace {

using dra::testing::CannedHttpServer;
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

// CdStatusRegistrar when the daemon leaves its ComputeDomain, against a canned API server (its
// syncing is covered by cd_status_registrar_integration_test.cc).
// The public driver's line when a daemon leaves (docs/compatibility.md "Log lines"), at level 0,
// with the "from ComputeDomain <namespace>/<name>" its e2e tests grep for.
TEST(CdStatusRegistrarTest, LeavingLogsTheRemovedNodeAtLevelZero) {
  k8s::ComputeDomain cd;
  cd.metadata.namespace_name = "default";
  cd.metadata.name = "imex-channel-injection";
  cd.metadata.uid = "cd-uid";
  k8s::ComputeDomainNode me;
  me.name = "node-a";
  me.ip_address = "10.2.0.7";
  me.clique_id = "c1";
  cd.status.nodes = {me};
  const std::string body = cd.ToJson().dump();
  CannedHttpServer server([&](const std::string& line) -> CannedHttpServer::Reply {
    if (line.find("/computedomains/imex-channel-injection") != std::string::npos) {
      return {200, body, ""};
    }
    return {404, R"({"kind":"Status","code":404,"reason":"NotFound"})", ""};
  });
  k8s::RestConfig rest;
  rest.server = server.url();
  auto client = k8s::Client::Create(rest);
  ASSERT_TRUE(client.ok()) << client.status();
  CdStatusRegistrar registrar(
      client->get(),
      {.cd_namespace = "default",
       .cd_name = "imex-channel-injection",
       .cd_uid = "cd-uid",
       .me = {.node_name = "node-a", .pod_ip = "10.2.0.7", .clique_id = "c1"}},
      [](const auto&) { return absl::OkStatus(); });
  log::LogCapture logs(/*verbosity=*/0);
  absl::Status s = registrar.Stop(absl::Seconds(10));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(logs.Text(),
              HasSubstr("] \"Successfully removed node with IP 10.2.0.7 from ComputeDomain "
                        "default/imex-channel-injection\"\n"));
}

}  // namespace
}  // namespace dra::cddaemon
