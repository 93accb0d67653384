#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/objects_resource.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// A template-generated claim after the scheduler allocated it and the kubelet plugin reported
// device status. "futureField" in a result and "extra" in the status are fields we do not model.
constexpr const char* kAllocatedClaim = R"json({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "ResourceClaim",
  "metadata": {
    "name": "trainer-0-gpu-x7k2p",
    "generateName": "trainer-0-gpu-",
    "namespace": "team-a",
    "uid": "6f1b3c1e-5b8d-4a52-9a43-0c1f5d0e7a11",
    "resourceVersion": "48211",
    "creationTimestamp": "2026-03-01T10:00:00Z",
    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer-0",
                         "uid": "0a6c1a70-1b7c-4d9e-8f2a-5d7e4c3b2a10", "controller": true,
                         "blockOwnerDeletion": true}],
    "finalizers": ["resource.kubernetes.io/delete-protection"]
  },
  "spec": {
    "devices": {
      "requests": [
        {"name": "gpu",
         "exactly": {"deviceClassName": "gpu.nvidia.com",
                     "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.matches('H100')"}}],
                     "allocationMode": "ExactCount",
                     "count": 1,
                     "adminAccess": false,
                     "tolerations": [{"key": "gpu.nvidia.com/unhealthy", "operator": "Exists",
                                      "effect": "NoSchedule"}]}},
        {"name": "mig",
         "firstAvailable": [
           {"name": "big", "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount",
            "count": 1,
            "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}]},
           {"name": "small", "deviceClassName": "mig.nvidia.com", "count": 2,
            "capacity": {"requests": {"memory": "10Gi"}}}
         ]}
      ],
      "constraints": [{"requests": ["gpu", "mig"],
                       "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
      "config": [
        {"requests": ["gpu"],
         "opaque": {"driver": "gpu.nvidia.com",
                    "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                   "sharing": {"strategy": "TimeSlicing",
                                               "timeSlicingConfig": {"interval": "Long"}}}}}
      ]
    }
  },
  "status": {
    "allocation": {
      "devices": {
        "results": [
          {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0",
           "tolerations": [{"key": "gpu.nvidia.com/unhealthy", "operator": "Exists",
                            "effect": "NoSchedule"}],
           "bindingConditions": ["Ready"], "bindingFailureConditions": ["Failed"]},
          {"request": "mig/small", "driver": "gpu.nvidia.com", "pool": "gpu-node-1",
           "device": "gpu-1-mig-1g10gb-0", "shareID": "3b0c6a2e-9f1d-4e7a-8c5b-2d4f6a8b0c1e",
           "consumedCapacity": {"memory": "10Gi"}, "futureField": {"x": 1}},
          {"request": "mig/small", "driver": "gpu.nvidia.com", "pool": "gpu-node-1",
           "device": "gpu-1-mig-1g10gb-1", "adminAccess": true}
        ],
        "config": [
          {"source": "FromClass",
           "opaque": {"driver": "gpu.nvidia.com",
                      "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}}},
          {"source": "FromClaim", "requests": ["gpu"],
           "opaque": {"driver": "gpu.nvidia.com",
                      "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                     "sharing": {"strategy": "TimeSlicing",
                                                 "timeSlicingConfig": {"interval": "Long"}}}}}
        ]
      },
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["gpu-node-1"]}]}]},
      "allocationTimestamp": "2026-03-01T10:00:05Z"
    },
    "reservedFor": [{"resource": "pods", "name": "trainer-0",
                     "uid": "0a6c1a70-1b7c-4d9e-8f2a-5d7e4c3b2a10"}],
    "devices": [
      {"driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-0",
       "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1,
                       "lastTransitionTime": "2026-03-01T10:00:07Z", "reason": "Prepared",
                       "message": ""}],
       "data": {"uuid": "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"},
       "networkData": {"interfaceName": "eth1", "ips": ["10.0.0.5/24"],
                       "hardwareAddress": "aa:bb:cc:dd:ee:ff"}}
    ],
    "extra": true
  }
})json";

TEST(ResourceClaimTest, DecodesSpec) {
  absl::StatusOr<ResourceClaim> claim = ResourceClaim::FromJson(json::parse(kAllocatedClaim));
  ASSERT_TRUE(claim.ok()) << claim.status();
  const DeviceClaim& devices = claim->spec.devices;
  ASSERT_EQ(devices.requests.size(), 2u);
  const DeviceRequest& gpu = devices.requests[0];
  EXPECT_EQ(gpu.name, "gpu");
  ASSERT_TRUE(gpu.exactly.has_value());
  EXPECT_EQ(gpu.exactly->device_class_name, "gpu.nvidia.com");
  EXPECT_EQ(gpu.exactly->allocation_mode, "ExactCount");
  EXPECT_EQ(gpu.exactly->count, 1);
  EXPECT_EQ(gpu.exactly->admin_access, false);
  EXPECT_EQ(gpu.exactly->tolerations[0]["operator"], "Exists");
  ASSERT_EQ(gpu.exactly->selectors.size(), 1u);
  EXPECT_THAT(gpu.exactly->selectors[0].cel->expression, HasSubstr("H100"));
  EXPECT_TRUE(gpu.first_available.empty());
  const DeviceRequest& mig = devices.requests[1];
  EXPECT_FALSE(mig.exactly.has_value());
  ASSERT_EQ(mig.first_available.size(), 2u);
  EXPECT_EQ(mig.first_available[1].name, "small");
  EXPECT_EQ(mig.first_available[1].count, 2);
  ASSERT_TRUE(mig.first_available[1].capacity.has_value());
  EXPECT_EQ(mig.first_available[1].capacity->requests.at("memory").ToString(), "10Gi");
  ASSERT_EQ(devices.constraints.size(), 1u);
  EXPECT_EQ(devices.constraints[0].match_attribute, "resource.kubernetes.io/pcieRoot");
  EXPECT_FALSE(devices.constraints[0].distinct_attribute.has_value());
  ASSERT_EQ(devices.config.size(), 1u);
  EXPECT_EQ(devices.config[0].requests, (std::vector<std::string>{"gpu"}));
  EXPECT_EQ(devices.config[0].opaque->parameters["sharing"]["strategy"], "TimeSlicing");
}

TEST(ResourceClaimTest, DecodesAllocationStatus) {
  absl::StatusOr<ResourceClaim> claim = ResourceClaim::FromJson(json::parse(kAllocatedClaim));
  ASSERT_TRUE(claim.ok()) << claim.status();
  ASSERT_TRUE(claim->status.allocation.has_value());
  const AllocationResult& allocation = *claim->status.allocation;
  ASSERT_EQ(allocation.devices.results.size(), 3u);
  const DeviceRequestAllocationResult& r0 = allocation.devices.results[0];
  EXPECT_EQ(r0.request, "gpu");
  EXPECT_EQ(r0.driver, "gpu.nvidia.com");
  EXPECT_EQ(r0.pool, "gpu-node-1");
  EXPECT_EQ(r0.device, "gpu-0");
  EXPECT_EQ(r0.binding_conditions, (std::vector<std::string>{"Ready"}));
  EXPECT_FALSE(r0.admin_access.has_value());
  const DeviceRequestAllocationResult& r1 = allocation.devices.results[1];
  EXPECT_EQ(r1.request, "mig/small");
  EXPECT_EQ(r1.share_id, "3b0c6a2e-9f1d-4e7a-8c5b-2d4f6a8b0c1e");
  EXPECT_EQ(r1.consumed_capacity.at("memory"), Quantity::FromBytes(int64_t{10} << 30));
  EXPECT_TRUE(r1.unknown_fields.contains("futureField"));
  EXPECT_EQ(allocation.devices.results[2].admin_access, true);
  ASSERT_EQ(allocation.devices.config.size(), 2u);
  EXPECT_EQ(allocation.devices.config[0].source, "FromClass");
  EXPECT_TRUE(allocation.devices.config[0].requests.empty());
  EXPECT_EQ(allocation.devices.config[1].source, "FromClaim");
  EXPECT_EQ(allocation.node_selector["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "gpu-node-1");
  EXPECT_EQ(allocation.allocation_timestamp, "2026-03-01T10:00:05Z");
  ASSERT_EQ(claim->status.reserved_for.size(), 1u);
  EXPECT_EQ(claim->status.reserved_for[0].api_group, "");
  EXPECT_EQ(claim->status.reserved_for[0].resource, "pods");
  EXPECT_EQ(claim->status.reserved_for[0].uid, "0a6c1a70-1b7c-4d9e-8f2a-5d7e4c3b2a10");
  ASSERT_EQ(claim->status.devices.size(), 1u);
  EXPECT_EQ(claim->status.devices[0].conditions[0]["reason"], "Prepared");
  EXPECT_EQ(claim->status.devices[0].data["uuid"], "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c");
  EXPECT_EQ(claim->status.devices[0].network_data["interfaceName"], "eth1");
}

TEST(ResourceClaimTest, RoundTripsUnchanged) {
  json in = json::parse(kAllocatedClaim);
  absl::StatusOr<ResourceClaim> claim = ResourceClaim::FromJson(in);
  ASSERT_TRUE(claim.ok());
  EXPECT_EQ(claim->ToJson(), in) << claim->ToJson().dump(2);
}

// The plugin's status write: allocation (immutable on the server) must come back byte-identical,
// including fields this codec does not model.
TEST(ResourceClaimTest, StatusEditKeepsAllocationIntact) {
  json in = json::parse(kAllocatedClaim);
  absl::StatusOr<ResourceClaim> claim = ResourceClaim::FromJson(in);
  ASSERT_TRUE(claim.ok());
  AllocatedDeviceStatus mig_status;
  mig_status.driver = "gpu.nvidia.com";
  mig_status.pool = "gpu-node-1";
  mig_status.device = "gpu-1-mig-1g10gb-0";
  mig_status.share_id = "3b0c6a2e-9f1d-4e7a-8c5b-2d4f6a8b0c1e";
  mig_status.conditions = json::parse(R"([{"type": "Ready", "status": "False",
      "lastTransitionTime": "2026-03-01T10:00:08Z", "reason": "Preparing", "message": ""}])");
  claim->status.devices.push_back(mig_status);
  json out = claim->ToJson();
  EXPECT_EQ(out["status"]["allocation"], in["status"]["allocation"]);
  EXPECT_EQ(out["spec"], in["spec"]);
  EXPECT_EQ(out["status"]["extra"], true);
  ASSERT_EQ(out["status"]["devices"].size(), 2u);
  EXPECT_EQ(out["status"]["devices"][1], json::parse(R"({
    "driver": "gpu.nvidia.com", "pool": "gpu-node-1", "device": "gpu-1-mig-1g10gb-0",
    "shareID": "3b0c6a2e-9f1d-4e7a-8c5b-2d4f6a8b0c1e",
    "conditions": [{"type": "Ready", "status": "False",
      "lastTransitionTime": "2026-03-01T10:00:08Z", "reason": "Preparing", "message": ""}]
  })"));

  // Deallocation clears allocation and reservations.
  claim->status.allocation.reset();
  claim->status.reserved_for.clear();
  claim->status.devices.clear();
  out = claim->ToJson();
  EXPECT_EQ(out["status"], json::parse(R"({"extra": true})"));
}

TEST(ResourceClaimTest, BuiltInCodeForCreate) {
  ResourceClaim claim;
  claim.metadata.name = "shared-gpus";
  claim.metadata.namespace_name = "team-a";
  DeviceRequest request;
  request.name = "gpus";
  request.exactly = ExactDeviceRequest{
      .device_class_name = "gpu.nvidia.com", .allocation_mode = "ExactCount", .count = 2};
  claim.spec.devices.requests.push_back(request);
  DeviceClaimConfiguration config;
  config.opaque = OpaqueDeviceConfiguration{
      .driver = "gpu.nvidia.com",
      .parameters = json::parse(R"({"apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "GpuConfig"})")};
  claim.spec.devices.config.push_back(config);
  EXPECT_EQ(claim.ToJson(), json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "shared-gpus", "namespace": "team-a"},
    "spec": {"devices": {
      "requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                 "allocationMode": "ExactCount", "count": 2}}],
      "config": [{"opaque": {"driver": "gpu.nvidia.com",
                             "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                                            "kind": "GpuConfig"}}}]
    }}
  })"));

  // An empty claim still writes spec.devices (no omitempty in Go).
  EXPECT_EQ(ResourceClaim().ToJson(), json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {},
    "spec": {"devices": {}}
  })"));
}

TEST(ResourceClaimTest, WrongTypesNameClaimAndPath) {
  struct Case {
    const char* pointer;  // JSON pointer of the member to break
    json value;
    const char* want;
  };
  const Case cases[] = {
      {"/status/allocation/devices/results/1/consumedCapacity/memory", json("ten"),
       "status.allocation.devices.results[1].consumedCapacity[\"memory\"]: invalid quantity "
       "\"ten\""},
      {"/status/allocation/devices/results/0/adminAccess", json("true"),
       "status.allocation.devices.results[0].adminAccess: expected boolean, got string"},
      {"/spec/devices/requests/1/firstAvailable/0/count", json("1"),
       "spec.devices.requests[1].firstAvailable[0].count: expected integer, got string"},
      {"/spec/devices/requests/0/exactly/selectors/0/cel/expression", json(5),
       "spec.devices.requests[0].exactly.selectors[0].cel.expression: expected string, got "
       "integer"},
      {"/spec/devices/config/0/opaque", json::array(),
       "spec.devices.config[0].opaque: expected object, got array"},
      {"/status/reservedFor/0/uid", json(1),
       "status.reservedFor[0].uid: expected string, got integer"},
      {"/status/devices", json::object(), "status.devices: expected array, got object"},
  };
  for (const Case& c : cases) {
    json in = json::parse(kAllocatedClaim);
    in[json::json_pointer(c.pointer)] = c.value;
    absl::StatusOr<ResourceClaim> claim = ResourceClaim::FromJson(in);
    ASSERT_FALSE(claim.ok()) << c.pointer;
    EXPECT_THAT(std::string(claim.status().message()),
                HasSubstr(std::string("ResourceClaim \"team-a/trainer-0-gpu-x7k2p\": ") + c.want))
        << c.pointer;
  }
}

TEST(ResourceClaimTest, RejectsOtherKinds) {
  json in = json::parse(kAllocatedClaim);
  in["kind"] = "ResourceSlice";
  absl::StatusOr<ResourceClaim> claim = ResourceClaim::FromJson(in);
  ASSERT_FALSE(claim.ok());
  EXPECT_EQ(claim.status().message(),
            "ResourceClaim \"team-a/trainer-0-gpu-x7k2p\": kind: expected ResourceClaim, got "
            "ResourceSlice");
}

constexpr const char* kClaimTemplate = R"json({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "ResourceClaimTemplate",
  "metadata": {"name": "single-gpu", "namespace": "team-a",
               "uid": "aaaa0000-bbbb-4ccc-8ddd-eeeeffff0000", "resourceVersion": "400"},
  "spec": {
    "metadata": {"labels": {"app": "trainer"}, "annotations": {"team": "a"}},
    "spec": {"devices": {"requests": [
      {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
  }
})json";

TEST(ResourceClaimTemplateTest, DecodesAndRoundTrips) {
  json in = json::parse(kClaimTemplate);
  absl::StatusOr<ResourceClaimTemplate> tmpl = ResourceClaimTemplate::FromJson(in);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->spec.metadata.labels.at("app"), "trainer");
  EXPECT_EQ(tmpl->spec.metadata.annotations.at("team"), "a");
  ASSERT_EQ(tmpl->spec.spec.devices.requests.size(), 1u);
  EXPECT_EQ(tmpl->spec.spec.devices.requests[0].exactly->device_class_name, "gpu.nvidia.com");
  EXPECT_EQ(tmpl->ToJson(), in);
}

TEST(ResourceClaimTemplateTest, WrongTypeInNestedMetadata) {
  json in = json::parse(kClaimTemplate);
  in["spec"]["metadata"]["labels"]["app"] = false;
  absl::StatusOr<ResourceClaimTemplate> tmpl = ResourceClaimTemplate::FromJson(in);
  ASSERT_FALSE(tmpl.ok());
  EXPECT_EQ(tmpl.status().message(),
            "ResourceClaimTemplate \"team-a/single-gpu\": spec.metadata.labels[\"app\"]: "
            "expected string, got boolean");
}

}  // namespace
}  // namespace dra::k8s
