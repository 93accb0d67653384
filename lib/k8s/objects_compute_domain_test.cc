#include "lib/k8s/objects_compute_domain.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kComputeDomain = R"json({
  "apiVersion": "resource.nvidia.com/v1beta1",
  "kind": "ComputeDomain",
  "metadata": {"name": "imex-1", "namespace": "team-a", "uid": "cd-uid-1",
               "finalizers": ["resource.nvidia.com/computeDomain"]},
  "spec": {"numNodes": 2,
           "channel": {"resourceClaimTemplate": {"name": "imex-1-channel"},
                       "allocationMode": "All"}},
  "status": {"status": "Ready",
             "nodes": [{"name": "n1", "ipAddress": "10.0.0.1", "cliqueID": "u.7", "index": 0,
                        "status": "Ready"},
                       {"name": "n2", "ipAddress": "10.0.0.2", "cliqueID": "", "index": -1}]}
})json";

TEST(ComputeDomainTest, DecodesAndRoundTrips) {
  json in = json::parse(kComputeDomain);
  absl::StatusOr<ComputeDomain> cd = ComputeDomain::FromJson(in);
  ASSERT_TRUE(cd.ok()) << cd.status();
  EXPECT_EQ(cd->spec.num_nodes, 2);
  EXPECT_EQ(cd->spec.channel.resource_claim_template_name, "imex-1-channel");
  EXPECT_EQ(cd->spec.channel.allocation_mode, "All");
  EXPECT_EQ(cd->status.status, "Ready");
  ASSERT_EQ(cd->status.nodes.size(), 2u);
  EXPECT_EQ(cd->status.nodes[0].index, 0);
  EXPECT_EQ(cd->status.nodes[1].index, -1);
  EXPECT_EQ(cd->status.nodes[1].status, "");
  EXPECT_EQ(cd->ToJson(), in);
}

TEST(ComputeDomainTest, IndexZeroIsWrittenAndClearedNodesVanish) {
  ComputeDomain cd;
  cd.metadata.name = "x";
  cd.metadata.namespace_name = "ns";
  cd.spec.channel.resource_claim_template_name = "t";
  cd.status.nodes.push_back({.name = "n", .ip_address = "1.2.3.4", .clique_id = "c"});
  json out = cd.ToJson();
  EXPECT_EQ(out["status"]["nodes"][0]["index"], 0);
  EXPECT_FALSE(out["spec"].contains("numNodes"));
  absl::StatusOr<ComputeDomain> back = ComputeDomain::FromJson(out);
  ASSERT_TRUE(back.ok());
  back->status.nodes.clear();
  EXPECT_FALSE(back->ToJson()["status"].contains("nodes"));
}

TEST(ComputeDomainTest, WrongTypeNamesTheField) {
  json in = json::parse(kComputeDomain);
  in["status"]["nodes"][1]["index"] = "one";
  absl::StatusOr<ComputeDomain> cd = ComputeDomain::FromJson(in);
  ASSERT_FALSE(cd.ok());
  EXPECT_THAT(cd.status().message(), HasSubstr("status.nodes[1].index"));
  EXPECT_THAT(cd.status().message(), HasSubstr("team-a/imex-1"));
}

TEST(ComputeDomainCliqueTest, DecodesAndRoundTrips) {
  json in = json::parse(R"json({
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainClique",
    "metadata": {"name": "cd-uid-1.u.7", "namespace": "nvidia-dra-driver-gpu"},
    "daemons": [{"nodeName": "n1", "ipAddress": "10.0.0.1", "cliqueID": "u.7", "index": 0,
                 "status": "NotReady"}]
  })json");
  absl::StatusOr<ComputeDomainClique> clique = ComputeDomainClique::FromJson(in);
  ASSERT_TRUE(clique.ok()) << clique.status();
  ASSERT_EQ(clique->daemons.size(), 1u);
  EXPECT_EQ(clique->daemons[0].node_name, "n1");
  EXPECT_EQ(clique->daemons[0].status, "NotReady");
  EXPECT_EQ(clique->ToJson(), in);
  EXPECT_EQ(CliqueObjectName("cd-uid-1", "u.7"), "cd-uid-1.u.7");
}

}  // namespace
}  // namespace dra::k8s
