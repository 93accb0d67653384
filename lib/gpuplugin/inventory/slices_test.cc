// ResourceSlice content: slicing, and the consumable-shares fields per mode as the API server
// will receive them (the JSON of ResourceSlice::ToJson).

#include "lib/gpuplugin/inventory/slices.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"

namespace dra::gpu {
namespace {

using nlohmann::json;

// 80 GiB and 2 KiB: not a multiple of 1Mi, so the published value is rounded down.
constexpr int64_t kGpuMemory = (int64_t{80} << 30) + 2048;

Inventory TestInventory() {
  Inventory inv;
  AllocatableDevice gpu{.name = "gpu-0", .type = DeviceType::kGpu};
  gpu.published.name = "gpu-0";
  gpu.published.capacity["memory"].value = k8s::Quantity::FromBytes(kGpuMemory);
  AllocatableDevice mig{.name = "gpu-1-mig-1g5gb-19-0", .type = DeviceType::kMig};
  mig.published.name = mig.name;
  mig.published.capacity["memory"].value = k8s::Quantity::FromBytes(int64_t{4864} << 20);
  mig.published.capacity["multiprocessors"].value = k8s::Quantity::FromInt64(14);
  AllocatableDevice vfio{.name = "gpu-vfio-2", .type = DeviceType::kVfio};
  vfio.published.name = vfio.name;
  vfio.published.capacity["memory"].value = k8s::Quantity::FromBytes(kGpuMemory);
  AllocatableDevice no_memory{.name = "gpu-3", .type = DeviceType::kGpu};
  no_memory.published.name = "gpu-3";
  inv.devices = {gpu, mig, vfio, no_memory};
  return inv;
}

// The devices of the first slice, as JSON.
json Devices(const Inventory& inv, const api::ConsumableShares& shares) {
  kubeletplugin::DriverResources r = BuildDriverResources(inv, "node1", shares);
  k8s::ResourceSlice slice;
  slice.spec.devices = r.pools.at("node1").slices.at(0).devices;
  return slice.ToJson()["spec"]["devices"];
}

api::ConsumableShares Parse(const std::string& value) {
  FeatureGates gates;
  EXPECT_TRUE(api::RegisterDriverFeatureGates(gates).ok());
  EXPECT_TRUE(gates.Set("ConsumableShares=true").ok());
  auto s = api::ParseConsumableShares(value, gates);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.value_or(api::ConsumableShares{});
}

TEST(SlicesTest, DisabledPublishesDevicesUnchanged) {
  json d = Devices(TestInventory(), {});
  ASSERT_EQ(d.size(), 4u);
  for (const json& dev : d) EXPECT_FALSE(dev.contains("allowMultipleAllocations")) << dev;
  EXPECT_EQ(d[0]["capacity"], json::parse(R"({"memory": {"value": "83886082Ki"}})"));
}

TEST(SlicesTest, ConsumableSharesPerMode) {
  struct Case {
    std::string mode;
    json gpu_capacity;  // of gpu-0 (80Gi after rounding)
    json mig_memory;    // of the MIG device's memory (4864Mi)
  };
  const Case cases[] = {
      {"memory", json::parse(R"({"memory": {"value": "80Gi", "requestPolicy": {"default": "80Gi",
          "validRange": {"min": "1Mi", "max": "80Gi", "step": "1Mi"}}}})"),
       json::parse(R"({"value": "4864Mi", "requestPolicy": {"default": "4864Mi",
          "validRange": {"min": "1Mi", "max": "4864Mi", "step": "1Mi"}}})")},
      {"unlimited", json::parse(R"({"memory": {"value": "80Gi", "requestPolicy": {"default": "0",
          "validRange": {"min": "0", "max": "80Gi", "step": "1Mi"}}}})"),
       json::parse(R"({"value": "4864Mi", "requestPolicy": {"default": "0",
          "validRange": {"min": "0", "max": "4864Mi", "step": "1Mi"}}})")},
      {"4", json::parse(R"({"memory": {"value": "80Gi", "requestPolicy": {"default": "0",
          "validRange": {"min": "0", "max": "80Gi", "step": "1Mi"}}},
          "shares": {"value": "4", "requestPolicy": {"default": "1",
          "validRange": {"min": "1", "max": "4", "step": "1"}}}})"),
       json::parse(R"({"value": "4864Mi", "requestPolicy": {"default": "0",
          "validRange": {"min": "0", "max": "4864Mi", "step": "1Mi"}}})")},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode);
    json d = Devices(TestInventory(), Parse(c.mode));
    ASSERT_EQ(d.size(), 4u);
    // Full GPU.
    EXPECT_EQ(d[0]["allowMultipleAllocations"], true);
    EXPECT_EQ(d[0]["capacity"], c.gpu_capacity);
    // MIG device: memory gets the policy, other capacities stay plain.
    EXPECT_EQ(d[1]["allowMultipleAllocations"], true);
    EXPECT_EQ(d[1]["capacity"]["memory"], c.mig_memory);
    EXPECT_EQ(d[1]["capacity"]["multiprocessors"], json::parse(R"({"value": "14"})"));
    // VFIO devices are never shared.
    EXPECT_FALSE(d[2].contains("allowMultipleAllocations"));
    EXPECT_FALSE(d[2]["capacity"]["memory"].contains("requestPolicy"));
    // A device without memory capacity is still shareable; only shares (if any) are added.
    EXPECT_EQ(d[3]["allowMultipleAllocations"], true);
    if (c.mode == "4") {
      EXPECT_EQ(d[3]["capacity"], json({{"shares", c.gpu_capacity["shares"]}}));
    } else {
      EXPECT_FALSE(d[3].contains("capacity")) << d[3];
    }
  }
}

TEST(SlicesTest, ManyDevicesAreSplitIntoSlicesOf128) {
  Inventory inv;
  for (int i = 0; i < 130; ++i) {
    AllocatableDevice d{.name = "gpu-" + std::to_string(i)};
    d.published.name = d.name;
    inv.devices.push_back(d);
  }
  kubeletplugin::DriverResources r = BuildDriverResources(inv, "n", Parse("memory"));
  ASSERT_EQ(r.pools.at("n").slices.size(), 2u);
  EXPECT_EQ(r.pools.at("n").slices[0].devices.size(), 128u);
  EXPECT_EQ(r.pools.at("n").slices[1].devices.size(), 2u);
}

}  // namespace
}  // namespace dra::gpu
