#include "lib/k8s/objects_resource.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// A slice as the GPU kubelet plugin publishes it for two full GPUs. The spec's
// "skipNodeOperations" and the device's "nodeAllocatableResources" are fields we do not model.
constexpr const char* kGpuSlice = R"json({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "ResourceSlice",
  "metadata": {
    "name": "node1-gpu.nvidia.com-8vnfk",
    "generateName": "node1-gpu.nvidia.com-",
    "uid": "9e8d7c6b-5a49-4838-a271-605f4e3d2c1b",
    "resourceVersion": "3301",
    "generation": 1,
    "creationTimestamp": "2026-03-01T09:01:00Z",
    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node1",
                         "uid": "a3c9d1f2-0b1e-4c55-9d2a-6e0f1b2c3d4e", "controller": true}]
  },
  "spec": {
    "driver": "gpu.nvidia.com",
    "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
    "nodeName": "node1",
    "skipNodeOperations": ["*"],
    "devices": [
      {
        "name": "gpu-0",
        "attributes": {
          "type": {"string": "gpu"},
          "uuid": {"string": "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c"},
          "productName": {"string": "NVIDIA H100 80GB HBM3"},
          "brand": {"string": "Nvidia"},
          "architecture": {"string": "Hopper"},
          "index": {"int": 0},
          "minor": {"int": 0},
          "cudaComputeCapability": {"version": "9.0.0"},
          "driverVersion": {"version": "550.54.15"},
          "cudaDriverVersion": {"version": "12.4.0"},
          "addressingMode": {"string": "HMM"},
          "resource.kubernetes.io/pcieRoot": {"string": "pci0000:10"},
          "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"}
        },
        "capacity": {"memory": {"value": "80Gi"}},
        "nodeAllocatableResources": {"memory": {"overhead": {"perPod": "1Gi"}}}
      },
      {
        "name": "gpu-1",
        "attributes": {
          "type": {"string": "gpu"},
          "uuid": {"string": "GPU-0c9b3f1e-8d2a-4e5b-9f6c-7a8b9c0d1e2f"},
          "productName": {"string": "NVIDIA H100 80GB HBM3"},
          "index": {"int": 1},
          "minor": {"int": 1},
          "cudaComputeCapability": {"version": "9.0.0"},
          "driverVersion": {"version": "550.54.15"},
          "resource.kubernetes.io/pcieRoot": {"string": "pci0000:20"}
        },
        "capacity": {"memory": {"value": "80Gi"}}
      }
    ]
  }
})json";

// Partitionable devices (MIG-like): counters, taints, list attributes, binding conditions,
// consumable capacity.
constexpr const char* kPartitionSlice = R"json({
  "metadata": {"name": "node1-gpu.nvidia.com-mig-2xq4d"},
  "spec": {
    "driver": "gpu.nvidia.com",
    "pool": {"name": "node1", "generation": 4, "resourceSliceCount": 2},
    "nodeName": "node1",
    "devices": [
      {
        "name": "gpu-0-mig-1g10gb-0",
        "attributes": {
          "profile": {"string": "1g.10gb"},
          "parentIndex": {"int": 0},
          "placements": {"ints": [0, 1, 2]},
          "features": {"strings": ["mig", "p2p"]},
          "flags": {"bools": [true, false]},
          "compat": {"versions": ["1.0.0", "2.1.0"]},
          "big": {"int": 9007199254740993},
          "mig": {"bool": true}
        },
        "capacity": {
          "memory": {"value": "9856Mi",
                     "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}}
        },
        "consumesCounters": [
          {"counterSet": "gpu-0-counters",
           "counters": {"memory": {"value": "10Gi"}, "multiprocessors": {"value": "16"}}}
        ],
        "taints": [
          {"key": "gpu.nvidia.com/unhealthy", "value": "xid-79", "effect": "NoExecute",
           "timeAdded": "2026-03-01T09:40:00Z"}
        ],
        "bindsToNode": true,
        "bindingConditions": ["Ready"],
        "bindingFailureConditions": ["Failed"],
        "allowMultipleAllocations": true
      }
    ]
  }
})json";

constexpr const char* kCounterSlice = R"json({
  "metadata": {"name": "node1-gpu.nvidia.com-counters-b7k1s"},
  "spec": {
    "driver": "gpu.nvidia.com",
    "pool": {"name": "node1", "generation": 4, "resourceSliceCount": 2},
    "nodeName": "node1",
    "sharedCounters": [
      {"name": "gpu-0-counters",
       "counters": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "132"}}}
    ]
  }
})json";

TEST(ResourceSliceTest, DecodesGpuSlice) {
  absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(json::parse(kGpuSlice));
  ASSERT_TRUE(slice.ok()) << slice.status();
  const ResourceSliceSpec& spec = slice->spec;
  EXPECT_EQ(spec.driver, "gpu.nvidia.com");
  EXPECT_EQ(spec.pool.name, "node1");
  EXPECT_EQ(spec.pool.generation, 1);
  EXPECT_EQ(spec.pool.resource_slice_count, 1);
  EXPECT_EQ(spec.node_name, "node1");
  EXPECT_FALSE(spec.all_nodes.has_value());
  EXPECT_TRUE(spec.node_selector.is_null());
  ASSERT_EQ(spec.devices.size(), 2u);
  const Device& gpu0 = spec.devices[0];
  EXPECT_EQ(gpu0.name, "gpu-0");
  EXPECT_EQ(gpu0.attributes.at("uuid").string_value, "GPU-4cf8db2d-06c0-7d70-1a51-e59b25b2c16c");
  EXPECT_EQ(gpu0.attributes.at("productName").string_value, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu0.attributes.at("index").int_value, 0);
  EXPECT_EQ(gpu0.attributes.at("driverVersion").version_value, "550.54.15");
  EXPECT_EQ(gpu0.attributes.at("cudaComputeCapability").version_value, "9.0.0");
  EXPECT_EQ(gpu0.attributes.at("resource.kubernetes.io/pcieRoot").string_value, "pci0000:10");
  EXPECT_EQ(gpu0.attributes.at("index").ValueCount(), 1);
  EXPECT_EQ(gpu0.capacity.at("memory").value, Quantity::FromBytes(int64_t{80} << 30));
  EXPECT_TRUE(gpu0.unknown_fields.contains("nodeAllocatableResources"));
  EXPECT_EQ(spec.devices[1].attributes.at("index").int_value, 1);
  EXPECT_TRUE(spec.unknown_fields.contains("skipNodeOperations"));
  EXPECT_EQ(slice->metadata.owner_references.at(0).name, "node1");
}

TEST(ResourceSliceTest, RoundTripsUnchanged) {
  for (const char* fixture : {kGpuSlice, kPartitionSlice, kCounterSlice}) {
    json in = json::parse(fixture);
    absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(in);
    ASSERT_TRUE(slice.ok()) << slice.status();
    json out = slice->ToJson();
    // apiVersion and kind are always set on output.
    in["apiVersion"] = "resource.k8s.io/v1";
    in["kind"] = "ResourceSlice";
    EXPECT_EQ(out, in) << out.dump(2);
  }
}

TEST(ResourceSliceTest, DecodesPartitionableFeatures) {
  absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(json::parse(kPartitionSlice));
  ASSERT_TRUE(slice.ok()) << slice.status();
  const Device& d = slice->spec.devices.at(0);
  EXPECT_EQ(d.attributes.at("placements").int_values, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(d.attributes.at("features").string_values, (std::vector<std::string>{"mig", "p2p"}));
  EXPECT_EQ(d.attributes.at("flags").bool_values, (std::vector<bool>{true, false}));
  EXPECT_EQ(d.attributes.at("big").int_value, int64_t{9007199254740993});  // exact, not a double
  EXPECT_EQ(d.attributes.at("mig").bool_value, true);
  EXPECT_EQ(d.capacity.at("memory").value.ToString(), "9856Mi");
  EXPECT_EQ(d.capacity.at("memory").request_policy["default"], "1Gi");
  ASSERT_EQ(d.consumes_counters.size(), 1u);
  EXPECT_EQ(d.consumes_counters[0].counter_set, "gpu-0-counters");
  EXPECT_EQ(d.consumes_counters[0].counters.at("multiprocessors").value.Value(), 16);
  ASSERT_EQ(d.taints.size(), 1u);
  EXPECT_EQ(d.taints[0].effect, "NoExecute");
  EXPECT_EQ(d.taints[0].time_added, "2026-03-01T09:40:00Z");
  EXPECT_EQ(d.binds_to_node, true);
  EXPECT_EQ(d.binding_conditions, (std::vector<std::string>{"Ready"}));
  EXPECT_EQ(d.allow_multiple_allocations, true);

  absl::StatusOr<ResourceSlice> counters = ResourceSlice::FromJson(json::parse(kCounterSlice));
  ASSERT_TRUE(counters.ok()) << counters.status();
  ASSERT_EQ(counters->spec.shared_counters.size(), 1u);
  EXPECT_EQ(counters->spec.shared_counters[0].counters.at("memory").value.ToString(), "80Gi");
}

TEST(ResourceSliceTest, WrongAttributeTypeNamesSliceAndPath) {
  json in = json::parse(kGpuSlice);
  in["spec"]["devices"][1]["attributes"]["index"]["int"] = "1";
  absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(in);
  ASSERT_FALSE(slice.ok());
  EXPECT_EQ(slice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slice.status().message(),
            "ResourceSlice \"node1-gpu.nvidia.com-8vnfk\": "
            "spec.devices[1].attributes[\"index\"].int: expected integer, got string");
}

TEST(ResourceSliceTest, AttributeNeedsExactlyOneValue) {
  json two = json::parse(kGpuSlice);
  two["spec"]["devices"][0]["attributes"]["index"] = json::parse(R"({"int": 0, "string": "0"})");
  absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(two);
  ASSERT_FALSE(slice.ok());
  EXPECT_EQ(slice.status().message(),
            "ResourceSlice \"node1-gpu.nvidia.com-8vnfk\": spec.devices[0].attributes[\"index\"]: "
            "must have exactly one of int, bool, string, version, ints, bools, strings, "
            "versions; has 2");

  json none = json::parse(kGpuSlice);
  none["spec"]["devices"][0]["attributes"]["uuid"] = json::parse(R"({"ints": [], "future": 1})");
  slice = ResourceSlice::FromJson(none);
  ASSERT_FALSE(slice.ok());
  EXPECT_THAT(std::string(slice.status().message()),
              HasSubstr("spec.devices[0].attributes[\"uuid\"]: must have exactly one of"));
  EXPECT_THAT(std::string(slice.status().message()), HasSubstr("has 0"));
}

TEST(ResourceSliceTest, BadQuantityNamesPath) {
  json in = json::parse(kGpuSlice);
  in["spec"]["devices"][0]["capacity"]["memory"]["value"] = "80 GiB";
  absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(in);
  ASSERT_FALSE(slice.ok());
  EXPECT_THAT(std::string(slice.status().message()),
              HasSubstr("ResourceSlice \"node1-gpu.nvidia.com-8vnfk\": "
                        "spec.devices[0].capacity[\"memory\"].value: invalid quantity \"80 GiB\""));
}

TEST(ResourceSliceTest, BuiltInCodeForCreate) {
  ResourceSlice slice;
  slice.metadata.generate_name = "00000-gpu.nvidia.com-node1-";
  slice.metadata.owner_references.push_back(
      {.api_version = "v1", .kind = "Node", .name = "node1", .uid = "u1", .controller = true});
  slice.spec.driver = "gpu.nvidia.com";
  slice.spec.pool = {.name = "node1", .generation = 0, .resource_slice_count = 1};
  slice.spec.node_name = "node1";
  Device gpu;
  gpu.name = "gpu-0";
  gpu.attributes["index"] = DeviceAttribute::Int(0);
  gpu.attributes["uuid"] = DeviceAttribute::String("GPU-1");
  gpu.attributes["driverVersion"] = DeviceAttribute::Version("550.54.15");
  gpu.attributes["mig"] = DeviceAttribute::Bool(false);
  gpu.capacity["memory"].value = Quantity::FromBytes(int64_t{81920} << 20);
  slice.spec.devices.push_back(gpu);
  EXPECT_EQ(slice.ToJson(), json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {
      "generateName": "00000-gpu.nvidia.com-node1-",
      "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "u1",
                           "controller": true}]
    },
    "spec": {
      "driver": "gpu.nvidia.com",
      "pool": {"name": "node1", "generation": 0, "resourceSliceCount": 1},
      "nodeName": "node1",
      "devices": [{
        "name": "gpu-0",
        "attributes": {"index": {"int": 0}, "uuid": {"string": "GPU-1"},
                       "driverVersion": {"version": "550.54.15"}, "mig": {"bool": false}},
        "capacity": {"memory": {"value": "80Gi"}}
      }]
    }
  })"));
}

TEST(ResourceSliceTest, EditsOverrideRawAndUnknownFieldsSurvive) {
  absl::StatusOr<ResourceSlice> slice = ResourceSlice::FromJson(json::parse(kGpuSlice));
  ASSERT_TRUE(slice.ok());
  slice->spec.pool.generation = 2;
  slice->spec.devices.pop_back();
  slice->spec.devices[0].attributes.erase("brand");
  slice->spec.devices[0].capacity["memory"].value = *Quantity::Parse("40Gi");
  slice->metadata.resource_version.clear();
  json out = slice->ToJson();
  EXPECT_EQ(out["spec"]["pool"]["generation"], 2);
  EXPECT_EQ(out["spec"]["devices"].size(), 1u);
  EXPECT_FALSE(out["spec"]["devices"][0]["attributes"].contains("brand"));
  EXPECT_EQ(out["spec"]["devices"][0]["capacity"]["memory"]["value"], "40Gi");
  EXPECT_TRUE(out["spec"]["devices"][0].contains("nodeAllocatableResources"));
  EXPECT_EQ(out["spec"]["skipNodeOperations"], json::parse(R"(["*"])"));
  EXPECT_FALSE(out["metadata"].contains("resourceVersion"));

  slice->spec.devices.clear();
  EXPECT_FALSE(slice->ToJson()["spec"].contains("devices"));
}

constexpr const char* kDeviceClass = R"json({
  "apiVersion": "resource.k8s.io/v1",
  "kind": "DeviceClass",
  "metadata": {"name": "gpu.nvidia.com", "uid": "d1d2d3d4-0000-4000-8000-000000000001",
               "resourceVersion": "12", "generation": 1},
  "spec": {
    "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
    "config": [{"opaque": {"driver": "gpu.nvidia.com",
                           "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                                          "kind": "GpuConfig",
                                          "sharing": {"strategy": "TimeSlicing"}}}}],
    "extendedResourceName": "nvidia.com/gpu"
  }
})json";

TEST(DeviceClassTest, DecodesAndRoundTrips) {
  json in = json::parse(kDeviceClass);
  absl::StatusOr<DeviceClass> dc = DeviceClass::FromJson(in);
  ASSERT_TRUE(dc.ok()) << dc.status();
  ASSERT_EQ(dc->spec.selectors.size(), 1u);
  ASSERT_TRUE(dc->spec.selectors[0].cel.has_value());
  EXPECT_THAT(dc->spec.selectors[0].cel->expression,
              HasSubstr("device.driver == 'gpu.nvidia.com'"));
  ASSERT_EQ(dc->spec.config.size(), 1u);
  ASSERT_TRUE(dc->spec.config[0].opaque.has_value());
  EXPECT_EQ(dc->spec.config[0].opaque->driver, "gpu.nvidia.com");
  EXPECT_EQ(dc->spec.config[0].opaque->parameters["kind"], "GpuConfig");
  EXPECT_EQ(dc->spec.extended_resource_name, "nvidia.com/gpu");
  EXPECT_EQ(dc->ToJson(), in);
}

TEST(DeviceClassTest, BuiltInCode) {
  DeviceClass dc;
  dc.metadata.name = "mig.nvidia.com";
  DeviceSelector selector;
  selector.cel = CelDeviceSelector{.expression = "device.driver == 'gpu.nvidia.com'"};
  dc.spec.selectors.push_back(selector);
  DeviceClassConfiguration config;
  config.opaque = OpaqueDeviceConfiguration{.driver = "gpu.nvidia.com"};  // null parameters
  dc.spec.config.push_back(config);
  EXPECT_EQ(dc.ToJson(), json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "mig.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
             "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {}}}]}
  })"));
}

}  // namespace
}  // namespace dra::k8s
