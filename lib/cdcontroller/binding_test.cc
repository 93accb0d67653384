#include "lib/cdcontroller/binding.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cdcontroller {
namespace {

// A claim as the scheduler leaves it: channel-0 of node-1 allocated with the binding conditions,
// the domain's ComputeDomainChannelConfig from the class of the workload template.
nlohmann::json AllocatedClaim() {
  return nlohmann::json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "w-0-channel", "namespace": "team", "uid": "claim-uid", "generation": 1},
    "spec": {"devices": {"requests": [{"name": "channel", "exactly": {
      "deviceClassName": "compute-domain-default-channel.nvidia.com"}}]}},
    "status": {"allocation": {
      "devices": {
        "results": [{"request": "channel", "driver": "compute-domain.nvidia.com",
                     "pool": "node-1", "device": "channel-0",
                     "bindingConditions": ["IMEXDaemonReady"],
                     "bindingFailureConditions": ["IMEXDaemonFailed"]}],
        "config": [{"source": "FromClaim", "requests": ["channel"], "opaque": {
          "driver": "compute-domain.nvidia.com",
          "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                         "kind": "ComputeDomainChannelConfig", "domainID": "cd-uid",
                         "allocationMode": "Single"}}}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
      "allocationTimestamp": "2026-11-29T19:00:00Z"}}})");
}

k8s::ResourceClaim Decode(const nlohmann::json& j) {
  absl::StatusOr<k8s::ResourceClaim> c = k8s::ResourceClaim::FromJson(j);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : k8s::ResourceClaim{};
}

TEST(BindingClaimTest, PendingChannelWithItsDomainAndNode) {
  std::optional<BindingClaim> b = BindingClaimOf(Decode(AllocatedClaim()));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->domain_uid, "cd-uid");
  ASSERT_EQ(b->devices.size(), 1u);
  EXPECT_EQ(b->devices[0].pool, "node-1");
  EXPECT_EQ(b->devices[0].device, "channel-0");
  EXPECT_EQ(b->devices[0].node, "node-1");
  EXPECT_EQ(b->devices[0].state, BindingDevice::State::kPending);
  EXPECT_THAT(b->devices[0].conditions, testing::ElementsAre("IMEXDaemonReady"));
  EXPECT_THAT(b->devices[0].failure_conditions, testing::ElementsAre("IMEXDaemonFailed"));
}

TEST(BindingClaimTest, ReportedStatesAreRead) {
  nlohmann::json j = AllocatedClaim();
  j["status"]["devices"] = {{{"driver", "compute-domain.nvidia.com"},
                             {"pool", "node-1"},
                             {"device", "channel-0"},
                             {"conditions", {{{"type", "IMEXDaemonReady"}, {"status", "False"}}}}}};
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].state, BindingDevice::State::kPending);
  j["status"]["devices"][0]["conditions"][0]["status"] = "True";
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].state, BindingDevice::State::kReady);
  // A failure condition wins over the binding condition, as in the scheduler.
  j["status"]["devices"][0]["conditions"].push_back(
      {{"type", "IMEXDaemonFailed"}, {"status", "True"}});
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].state, BindingDevice::State::kFailed);
  // Another driver's entry for the same pool and device name is not ours.
  j["status"]["devices"][0]["driver"] = "gpu.nvidia.com";
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].state, BindingDevice::State::kPending);
}

TEST(BindingClaimTest, NoneWithoutAllocationOrBindingConditions) {
  nlohmann::json j = AllocatedClaim();
  j["status"]["allocation"]["devices"]["results"][0].erase("bindingConditions");
  j["status"]["allocation"]["devices"]["results"][0].erase("bindingFailureConditions");
  EXPECT_FALSE(BindingClaimOf(Decode(j)).has_value());
  EXPECT_TRUE(HasChannelWithoutBindingConditions(Decode(j)));
  EXPECT_FALSE(HasChannelWithoutBindingConditions(Decode(AllocatedClaim())));

  j = AllocatedClaim();
  j["status"].erase("allocation");
  EXPECT_FALSE(BindingClaimOf(Decode(j)).has_value());
  EXPECT_FALSE(HasChannelWithoutBindingConditions(Decode(j)));

  j = AllocatedClaim();
  j["status"]["allocation"]["devices"]["results"][0]["driver"] = "gpu.nvidia.com";
  EXPECT_FALSE(BindingClaimOf(Decode(j)).has_value());
}

TEST(BindingClaimTest, DomainFromTheConfigOfItsRequest) {
  nlohmann::json j = AllocatedClaim();
  // A config for another request does not apply; one without requests does.
  j["status"]["allocation"]["devices"]["config"][0]["requests"] = {"other"};
  EXPECT_EQ(BindingClaimOf(Decode(j))->domain_uid, "");
  j["status"]["allocation"]["devices"]["config"][0].erase("requests");
  EXPECT_EQ(BindingClaimOf(Decode(j))->domain_uid, "cd-uid");
  // A subrequest's result takes its parent request's config.
  j = AllocatedClaim();
  j["status"]["allocation"]["devices"]["results"][0]["request"] = "channel/first";
  EXPECT_EQ(BindingClaimOf(Decode(j))->domain_uid, "cd-uid");
  // A daemon config is not a channel's domain.
  j = AllocatedClaim();
  j["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["kind"] =
      "ComputeDomainDaemonConfig";
  EXPECT_EQ(BindingClaimOf(Decode(j))->domain_uid, "");
}

TEST(BindingClaimTest, NodeFromThePoolWithoutNodeSelector) {
  nlohmann::json j = AllocatedClaim();
  j["status"]["allocation"].erase("nodeSelector");
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].node, "node-1");
  j["status"]["allocation"]["devices"]["results"][0]["pool"] = "pool-x";
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].node, "pool-x");
}

TEST(AllocationNodeTest, OnlyASingleMetadataNameField) {
  k8s::AllocationResult a;
  EXPECT_EQ(AllocationNode(a), "");
  a.node_selector = nlohmann::json::parse(
      R"({"nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "In",
          "values": ["node-1"]}]}]})");
  EXPECT_EQ(AllocationNode(a), "");
  a.node_selector = nlohmann::json::parse(
      R"({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
          "values": ["node-1", "node-2"]}]}]})");
  EXPECT_EQ(AllocationNode(a), "");
  a.node_selector["nodeSelectorTerms"][0]["matchFields"][0]["values"] = {"node-2"};
  EXPECT_EQ(AllocationNode(a), "node-2");
}

TEST(BindingStatusApplyBodyTest, ReadyFailedAndKept) {
  k8s::ResourceClaim claim = Decode(AllocatedClaim());
  const absl::Time now = absl::FromUnixSeconds(1796000000);
  nlohmann::json kept = nlohmann::json::array(
      {{{"type", "IMEXDaemonReady"}, {"status", "True"}, {"reason", "before"}}});
  nlohmann::json body =
      BindingStatusApplyBody(claim,
                             {{.pool = "node-1",
                               .device = "channel-0",
                               .ready = true,
                               .reason = "IMEXDaemonReady",
                               .message = "ready"},
                              {.pool = "node-2",
                               .device = "channel-0",
                               .ready = false,
                               .reason = "ComputeDomainDeleted",
                               .message = "gone"},
                              {.pool = "node-3", .device = "channel-0", .keep_conditions = kept}},
                             now);
  EXPECT_EQ(body["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(body["kind"], "ResourceClaim");
  EXPECT_EQ(body["metadata"],
            nlohmann::json({{"name", "w-0-channel"}, {"namespace", "team"}, {"uid", "claim-uid"}}));
  const nlohmann::json& devices = body["status"]["devices"];
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0]["driver"], "compute-domain.nvidia.com");
  EXPECT_EQ(devices[0]["pool"], "node-1");
  EXPECT_EQ(devices[0]["conditions"],
            nlohmann::json::array({{{"type", "IMEXDaemonReady"},
                                    {"status", "True"},
                                    {"reason", "IMEXDaemonReady"},
                                    {"message", "ready"},
                                    {"lastTransitionTime", "2026-11-30T00:53:20Z"},
                                    {"observedGeneration", 1}}}));
  EXPECT_EQ(devices[1]["conditions"][0]["type"], "IMEXDaemonFailed");
  EXPECT_EQ(devices[1]["conditions"][0]["reason"], "ComputeDomainDeleted");
  EXPECT_EQ(devices[2]["conditions"], kept);
  // The body the scheduler reads back: a claim with it is Ready / failed.
  nlohmann::json j = AllocatedClaim();
  j["status"]["devices"] = devices;
  EXPECT_EQ(BindingClaimOf(Decode(j))->devices[0].state, BindingDevice::State::kReady);
}

}  // namespace
}  // namespace dra::cdcontroller
