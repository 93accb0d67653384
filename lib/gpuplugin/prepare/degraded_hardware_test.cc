// Hardware the usual profiles do not cover degrades the node instead of failing discovery
// (docs/compatibility.md "Devices"): each case starts the inventory on its own mock profile
// (test/doubles/profiles), checks what the ResourceSlice carries and what is reported as left out,
// and prepares a healthy GPU of that node through the real DeviceState.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/gpuplugin/inventory/slices.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class DegradedHardwareTest : public DeviceStateTest {
 protected:
  // The devices of the node's ResourceSlices, as published.
  std::vector<k8s::Device> Published() {
    kubeletplugin::DriverResources resources = BuildDriverResources(inventory_, "node1");
    std::vector<k8s::Device> out;
    for (const auto& slice : resources.pools.at("node1").slices) {
      out.insert(out.end(), slice.devices.begin(), slice.devices.end());
    }
    return out;
  }
  static std::vector<std::string> Names(const std::vector<k8s::Device>& devices) {
    std::vector<std::string> names;
    for (const k8s::Device& d : devices) names.push_back(d.name);
    return names;
  }
  static std::string StringAttribute(const k8s::Device& d, const std::string& key) {
    auto it = d.attributes.find(key);
    return it == d.attributes.end() ? "<absent>" : it->second.string_value.value_or("<not set>");
  }
  // Prepares `device` for a new claim and checks the CDI spec names its device node.
  void ExpectPrepares(const std::string& uid, const std::string& device, unsigned int minor) {
    auto prepared = state_->Prepare(Claim(uid, {device}));
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    ASSERT_EQ(prepared->size(), 1u);
    EXPECT_EQ((*prepared)[0].kubelet.device_name, device);
    EXPECT_EQ(StateOf(uid), checkpoint::ClaimState::kPrepareCompleted);
    auto spec = ReadFile(SpecPath(uid));
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_THAT(*spec, HasSubstr("\"path\": \"/dev/nvidia" + std::to_string(minor) + "\""));
  }
};

// GB10 and other unified-memory parts: NVML answers NOT_SUPPORTED for the memory info. The GPU is
// published without a memory capacity (as the Go driver does) and prepares as usual.
TEST_F(DegradedHardwareTest, GpuWithoutMemoryInfoIsPublishedWithoutMemoryCapacity) {
  Init("gb10-1x");
  const std::vector<k8s::Device> published = Published();
  ASSERT_THAT(Names(published), ElementsAre("gpu-0"));
  EXPECT_TRUE(published[0].capacity.empty());
  EXPECT_EQ(StringAttribute(published[0], "productName"), "NVIDIA GB10");
  EXPECT_EQ(StringAttribute(published[0], "architecture"), "Blackwell");
  EXPECT_FALSE(inventory_.devices[0].gpu.memory_bytes.has_value());
  ASSERT_EQ(inventory_.left_out.size(), 1u);
  EXPECT_THAT(inventory_.left_out[0],
              HasSubstr("capacity memory of GPU GPU-5a8e2c1d-0b7f-4e36-9d41-7c2f6e0a9b13"));
  EXPECT_THAT(inventory_.left_out[0], HasSubstr("not supported"));
  ExpectPrepares("uid-gb10", "gpu-0", 0);
  // Time-slicing goes through nvidia-smi, which must not trip over the missing memory info either.
  Configure("TimeSlicingSettings=true");
  auto sliced = state_->Prepare(Claim("uid-gb10-ts", {"gpu-0"}, TimeSliced("Long")));
  // gpu-0 is held by uid-gb10: refused for the overlap, not for anything about memory.
  ASSERT_FALSE(sliced.ok());
  EXPECT_THAT(sliced.status().message(), HasSubstr("already allocated"));
  ASSERT_TRUE(state_->Unprepare("uid-gb10").ok());
  sliced = state_->Prepare(Claim("uid-gb10-ts", {"gpu-0"}, TimeSliced("Long")));
  ASSERT_TRUE(sliced.ok()) << sliced.status();
  EXPECT_EQ(GpuSetting("gpu-0"), "Default/Long");
}

// A GPU that fell off the bus (NVML_ERROR_GPU_IS_LOST on every query but the handle by index) is
// left out, named by its index; the other GPUs are published and preparable.
TEST_F(DegradedHardwareTest, LostGpuIsLeftOutAndTheOthersArePublishedAndPrepare) {
  Init("h100-4x-gpu-lost");
  const std::vector<k8s::Device> published = Published();
  EXPECT_THAT(Names(published), ElementsAre("gpu-0", "gpu-1", "gpu-3"));
  for (const k8s::Device& d : published) {
    EXPECT_EQ(d.capacity.count("memory"), 1u) << d.name;
    EXPECT_NE(StringAttribute(d, "uuid"), "GPU-c94a0b7e-1f2d-4e68-a53b-7d0e9f1c2a84") << d.name;
  }
  ASSERT_EQ(inventory_.left_out.size(), 1u);
  EXPECT_THAT(inventory_.left_out[0], HasSubstr("GPU at index 2"));
  EXPECT_THAT(inventory_.left_out[0], HasSubstr("gpu is lost"));
  ExpectPrepares("uid-lost-0", "gpu-0", 0);
  ExpectPrepares("uid-lost-3", "gpu-3", 3);
  // The lost GPU is no device of this node: a claim naming it is refused, and changes nothing.
  auto lost = state_->Prepare(Claim("uid-lost-2", {"gpu-2"}));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(StateOf("uid-lost-2"), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-lost-2")));
  // nvidia-smi (time-slicing) on a healthy GPU of this node works too.
  Configure("TimeSlicingSettings=true");
  auto sliced = state_->Prepare(Claim("uid-lost-ts", {"gpu-1"}, TimeSliced("Short")));
  ASSERT_TRUE(sliced.ok()) << sliced.status();
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Short");
}

// Architecture and brand values NVML does not define today are published as "Unknown"; Rubin
// (NVML_DEVICE_ARCH_RUBIN) by its name, as the Go driver does.
TEST_F(DegradedHardwareTest, UnknownArchitectureAndBrandArePublishedAsUnknown) {
  Init("future-arch-2x");
  const std::vector<k8s::Device> published = Published();
  ASSERT_THAT(Names(published), ElementsAre("gpu-0", "gpu-1"));
  EXPECT_EQ(StringAttribute(published[0], "architecture"), "Unknown");
  EXPECT_EQ(StringAttribute(published[0], "brand"), "Unknown");
  EXPECT_EQ(StringAttribute(published[0], "productName"), "NVIDIA Future GPU");
  EXPECT_EQ(published[0].attributes.at("cudaComputeCapability").version_value, "11.0.0");
  EXPECT_EQ(StringAttribute(published[1], "architecture"), "Rubin");
  EXPECT_EQ(StringAttribute(published[1], "brand"), "Nvidia");
  EXPECT_TRUE(inventory_.left_out.empty());
  ExpectPrepares("uid-future", "gpu-0", 0);
  ExpectPrepares("uid-rubin", "gpu-1", 1);
}

}  // namespace
}  // namespace dra::gpu
