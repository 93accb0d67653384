// DeviceState with time-slicing (nvidia-smi through the mock driver root) and consumable shares.

#include "lib/gpu/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(DeviceStateTest, TimeSlicingSetsEachIntervalAndUnprepareResets) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  for (const char* interval : {"Default", "Short", "Medium", "Long"}) {
    SCOPED_TRACE(interval);
    SetGpu("gpu-2", "EXCLUSIVE_PROCESS", 1);  // whatever was there before
    const std::string uid = std::string("uid-") + interval;
    auto devices = state_->Prepare(Claim(uid, {"gpu-2", "gpu-5"}, TimeSliced(interval)));
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_EQ(GpuSetting("gpu-2"), std::string("Default/") + interval);
    EXPECT_EQ(GpuSetting("gpu-5"), std::string("Default/") + interval);
    EXPECT_EQ(GpuSetting("gpu-3"), "Default/Default");  // not in the claim
    auto stored = checkpoint_->Get(uid);
    ASSERT_TRUE(stored.ok() && stored->has_value());
    EXPECT_EQ((*stored)->state, checkpoint::ClaimState::kPrepareCompleted);
    EXPECT_EQ((*stored)->prepared_devices[0]["timeSliceApplied"], true);

    ASSERT_TRUE(state_->Unprepare(uid).ok());
    EXPECT_EQ(GpuSetting("gpu-2"), "Default/Default");
    EXPECT_EQ(GpuSetting("gpu-5"), "Default/Default");
  }
}

TEST_F(DeviceStateTest, TimeSlicingWithoutIntervalUsesDefault) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  SetGpu("gpu-1", "DEFAULT", 3);
  ASSERT_TRUE(
      state_->Prepare(Claim("uid-1", {"gpu-1"}, GpuConfigEntry({{"strategy", "TimeSlicing"}})))
          .ok());
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Default");
}

TEST_F(DeviceStateTest, TimeSlicingNeedsTheGate) {
  Init("h100-8x");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-1"}, TimeSliced("Long")));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("TimeSlicingSettings"));
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Default");
}

TEST_F(DeviceStateTest, IdempotentPrepareDoesNotRunNvidiaSmiAgain) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"}, TimeSliced("Long"))).ok());
  // If the second prepare ran nvidia-smi, it would fail.
  WrapNvidiaSmi("echo should not run >&2; exit 1");
  auto again = state_->Prepare(Claim("uid-1", {"gpu-0"}, TimeSliced("Long")));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(DeviceStateTest, PlainGpuClaimDoesNotTouchTheTimeSlice) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  WrapNvidiaSmi("echo should not run >&2; exit 1");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->prepared_devices[0]["timeSliceApplied"], false);
  EXPECT_TRUE(state_->Unprepare("uid-1").ok());
}

TEST_F(DeviceStateTest, FailingNvidiaSmiLeavesClaimStartedAndRetryWorks) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  WrapNvidiaSmi("echo 'Unable to set: GPU is busy' >&2; exit 15");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-4"}, TimeSliced("Medium")));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(api::IsPermanentConfigError(r.status())) << r.status();
  const std::string msg(r.status().message());
  EXPECT_THAT(msg, HasSubstr("nvidia-smi -i " + Uuid("gpu-4") + " -c DEFAULT"));
  EXPECT_THAT(msg, HasSubstr("exit code 15: Unable to set: GPU is busy"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));

  RestoreNvidiaSmi();
  Reopen();  // as after a plugin restart
  auto retry = state_->Prepare(Claim("uid-1", {"gpu-4"}, TimeSliced("Medium")));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ(GpuSetting("gpu-4"), "Default/Medium");
  EXPECT_TRUE(std::filesystem::exists(SpecPath("uid-1")));
}

// A prepare that set the first GPU and failed on the second is undone by the unprepare the
// cleanup runs once the claim is gone.
TEST_F(DeviceStateTest, UnprepareOfPartiallyPreparedClaimResetsWhatWasSet) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  const std::string real = root_path_ + "/usr/bin/nvidia-smi.real";
  WrapNvidiaSmi("case \"$*\" in *" + Uuid("gpu-6") + "*) echo broken >&2; exit 3;; esac\nexec " +
                real + " \"$@\"");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-5", "gpu-6"}, TimeSliced("Long")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GpuSetting("gpu-5"), "Default/Long");
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  RestoreNvidiaSmi();
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-5"), "Default/Default");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

// Records written before time-slicing existed have no timeSliceApplied: with the gate on,
// unprepare resets their GPUs (the Go driver's rule); with it off, they are left alone.
TEST_F(DeviceStateTest, LegacyRecordWithoutFlagResetsWhileGateOn) {
  for (bool gate : {true, false}) {
    SCOPED_TRACE(gate);
    Init("h100-8x");
    if (gate) Configure("TimeSlicingSettings=true");
    ASSERT_TRUE(state_->Prepare(Claim("uid-old", {"gpu-7"})).ok());
    ASSERT_TRUE(checkpoint_
                    ->Update([](checkpoint::ClaimMap& claims) {
                      // As an older plugin wrote it: no flag, and no step record.
                      for (nlohmann::json& d : claims["uid-old"].prepared_devices) {
                        d.erase("timeSliceApplied");
                      }
                      claims["uid-old"].steps = nullptr;
                      return absl::OkStatus();
                    })
                    .ok());
    SetGpu("gpu-7", "DEFAULT", 3);
    ASSERT_TRUE(state_->Unprepare("uid-old").ok());
    EXPECT_EQ(GpuSetting("gpu-7"), gate ? "Default/Default" : "Default/Long");
  }
}

TEST_F(DeviceStateTest, ConsumableSharesAllowEqualConfigsAndResetAfterTheLastClaim) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true,ConsumableShares=true", "memory");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-3"}, TimeSliced("Long"))).ok());
  auto second = state_->Prepare(Claim("uid-2", {"gpu-3", "gpu-4"}, TimeSliced("Long")));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Long");

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Long");  // uid-2 still uses it
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Default");
  EXPECT_EQ(GpuSetting("gpu-4"), "Default/Default");
}

TEST_F(DeviceStateTest, ConsumableSharesOverlapNeedsEqualConfigs) {
  struct Case {
    std::string name;
    nlohmann::json first, second;
    bool ok;
  };
  const Case cases[] = {
      {"both plain", nlohmann::json::array(), nlohmann::json::array(), true},
      {"explicit empty GpuConfig equals the default", nlohmann::json::array(),
       GpuConfigEntry(nullptr), true},
      {"same interval", TimeSliced("Short"), TimeSliced("Short"), true},
      {"omitted interval normalizes to Default", GpuConfigEntry({{"strategy", "TimeSlicing"}}),
       TimeSliced("Default"), true},
      {"other interval", TimeSliced("Short"), TimeSliced("Long"), false},
      {"plain vs time-sliced", nlohmann::json::array(), TimeSliced("Long"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Init("h100-8x");
    Configure("TimeSlicingSettings=true,ConsumableShares=true", "unlimited");
    ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"}, c.first)).ok());
    auto r = state_->Prepare(Claim("uid-2", {"gpu-0"}, c.second));
    if (c.ok) {
      EXPECT_TRUE(r.ok()) << r.status();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_THAT(std::string(r.status().message()),
                  HasSubstr("requested device gpu-0 has conflicting configuration with already "
                            "prepared claim uid-1"));
      EXPECT_FALSE(api::IsPermanentConfigError(r.status()));
      EXPECT_EQ(StateOf("uid-2"), std::nullopt);
    }
  }
}

TEST_F(DeviceStateTest, WithoutConsumableSharesTimeSlicedGpuIsStillExclusive) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"}, TimeSliced("Long"))).ok());
  auto r = state_->Prepare(Claim("uid-2", {"gpu-0"}, TimeSliced("Long")));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("requested device gpu-0 is already allocated to different claim uid-1"));
}

// With consumable shares the scheduler may give two requests of one claim the same device.
TEST_F(DeviceStateTest, TwoRequestsOnOneSharedDeviceGiveOneCdiDevice) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true,ConsumableShares=true", "unlimited");
  k8s::ResourceClaim claim = Claim("uid-1", {"gpu-1", "gpu-1"}, TimeSliced("Short"));
  claim.status.allocation->devices.results[1].request = "other";
  auto devices = state_->Prepare(claim);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].cdi_device_ids, (*devices)[1].cdi_device_ids);
  EXPECT_THAT((*devices)[1].requests, ::testing::ElementsAre("other"));
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto j = nlohmann::json::parse(*spec);
  EXPECT_EQ(j["devices"].size(), 1u) << *spec;
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Short");
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Default");
}

TEST_F(DeviceStateTest, MpsIsRejectedWithConsumableShares) {
  Init("h100-8x");
  Configure("MPSSupport=true,ConsumableShares=true", "4");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, GpuConfigEntry({{"strategy", "MPS"}})));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("MPS sharing is not supported when consumable shares is enabled"));
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

}  // namespace
}  // namespace dra::gpu
