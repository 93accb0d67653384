// DeviceState prepare/unprepare of full GPUs and static MIG devices: CDI specs, checkpoint,
// overlap, restarts, config errors.

#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(DeviceStateTest, PrepareWritesCdiSpecAndCheckpointIdempotently) {
  Init("h100-8x");
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-3"}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].kubelet.device_name, "gpu-3");
  EXPECT_THAT((*devices)[0].kubelet.cdi_device_ids,
              ::testing::ElementsAre("k8s.gpu.nvidia.com/claim=uid-1-gpu-3"));
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(*spec, HasSubstr("\"kind\": \"k8s.gpu.nvidia.com/claim\""));
  EXPECT_THAT(*spec, HasSubstr("\"name\": \"uid-1-gpu-3\""));
  EXPECT_THAT(*spec, HasSubstr("\"path\": \"/dev/nvidia3\""));
  EXPECT_THAT(*spec, HasSubstr("/dev/nvidiactl"));
  // Host paths are rewritten from the plugin's view of the driver root to the host's.
  EXPECT_THAT(*spec, HasSubstr("/host-driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so"));
  EXPECT_THAT(*spec, ::testing::Not(HasSubstr(root_path_)));

  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->state, checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ((*stored)->name, "claim-uid-1");

  auto again = state_->Prepare(Claim("uid-1", {"gpu-3"}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *devices);
}

TEST_F(DeviceStateTest, DeviceHeldByAnotherClaimIsRefused) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  auto other = state_->Prepare(Claim("uid-2", {"gpu-1", "gpu-0"}));
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("requested device gpu-0 is already allocated to different claim uid-1"));
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-2")));
  auto none = checkpoint_->Get("uid-2");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(DeviceStateTest, UnprepareWorksFromTheCheckpointAloneAfterARestart) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"})).ok());
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
  auto gone = checkpoint_->Get("uid-1");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  EXPECT_TRUE(state_->Unprepare("uid-1").ok());       // idempotent
  EXPECT_TRUE(state_->Unprepare("never-seen").ok());  // unknown claim
  // The device is free again.
  EXPECT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-0"})).ok());
}

TEST_F(DeviceStateTest, StaticMigDeviceGetsParentAndCapabilityNodes) {
  Init("a100-mig-4x");
  const AllocatableDevice* mig = nullptr;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig) {
      mig = &d;
      break;
    }
  }
  ASSERT_NE(mig, nullptr);
  auto devices = state_->Prepare(Claim("uid-m", {mig->name}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto spec = ReadFile(SpecPath("uid-m"));
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(*spec, HasSubstr(absl::StrCat("\"path\": \"/dev/nvidia", mig->gpu.minor, "\"")));
  EXPECT_THAT(*spec, HasSubstr("/dev/nvidia-caps/nvidia-cap"));
  EXPECT_EQ((*devices)[0].uuid, mig->mig->uuid);
}

TEST_F(DeviceStateTest, BadOpaqueConfigIsAPermanentErrorAndChangesNothing) {
  Init("h100-8x");
  nlohmann::json config =
      nlohmann::json::array({{{"source", "FromClaim"},
                              {"requests", nlohmann::json::array()},
                              {"opaque",
                               {{"driver", "gpu.nvidia.com"},
                                {"parameters",
                                 {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                  {"kind", "GpuConfig"},
                                  {"sharing", {{"strategy", "TimeSlicing"}, {"bogus", 1}}}}}}}}});
  auto r = state_->Prepare(Claim("uid-bad", {"gpu-0"}, config));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bogus"));
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-bad")));
}

TEST_F(DeviceStateTest, UnknownDeviceAndForeignPoolAreErrors) {
  Init("t4-2x");
  auto r = state_->Prepare(Claim("uid-x", {"gpu-7"}));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("allocatable not found for device \"gpu-7\""));
}

}  // namespace
}  // namespace dra::gpu
