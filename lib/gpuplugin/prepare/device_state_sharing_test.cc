// DeviceState with time-slicing (nvidia-smi through the mock driver root) and consumable shares.

#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

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
  EXPECT_EQ((*devices)[0].kubelet.cdi_device_ids, (*devices)[1].kubelet.cdi_device_ids);
  EXPECT_THAT((*devices)[1].kubelet.request_names, ::testing::ElementsAre("other"));
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

// ---- MigDeviceConfig time-slicing: the interval goes to the parent GPU (time_slicing.h) ----

class MigTimeSlicingTest : public DeviceStateTest {
 protected:
  void SetUp() override {
    Init("a100-mig-4x");  // GPUs 0 and 1: four MIG devices each
    Configure("TimeSlicingSettings=true,MPSSupport=true");
  }
  // The MIG devices of the GPU with `minor`, in name order.
  std::vector<std::string> MigOf(unsigned int minor) {
    std::vector<std::string> out;
    for (const AllocatableDevice& d : inventory_.devices) {
      if (d.type == DeviceType::kMig && d.gpu.minor == minor) out.push_back(d.name);
    }
    EXPECT_GE(out.size(), 2u);
    return out;
  }
  // "<compute mode>/<time-slice>" of the parent GPU of MIG device `mig` (GpuSetting reads the
  // device's GpuInfo, the parent's for a MIG device).
  std::string ParentSetting(const std::string& mig) { return GpuSetting(mig); }
  // nvidia-smi, made to fail loudly: a prepare that ran it would fail with its message.
  void ForbidNvidiaSmi() { WrapNvidiaSmi("echo nvidia-smi must not run >&2; exit 9"); }
};

TEST_F(MigTimeSlicingTest, IntervalIsSetOnTheParentAndResetAtUnprepare) {
  const std::string mig = MigOf(0)[0];
  SetGpu(mig, "PROHIBITED", 0);  // a compute mode the MIG prepare must leave alone
  const std::string mode_before = ParentSetting(mig).substr(0, ParentSetting(mig).find('/'));
  ASSERT_NE(mode_before, "Default");
  auto r = state_->Prepare(Claim("uid-a", {mig}, MigTimeSliced("Long")));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ParentSetting(mig), mode_before + "/Long");
  EXPECT_EQ(ParentSetting(MigOf(1)[0]), "Default/Default");  // another GPU: untouched
  auto stored = checkpoint_->Get("uid-a");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->steps[0], nlohmann::json({{"name", "timeSlicing"},
                                                 {"state", "applied"},
                                                 {"undo",
                                                  {{{"interval", "Long"},
                                                    {"gpus", {inventory_.Find(mig)->gpu.uuid}},
                                                    {"migParents", true}}}}}));
  // The device record of a MIG device carries no timeSliceApplied (the step record does).
  EXPECT_FALSE((*stored)->prepared_devices[0].contains("timeSliceApplied"));

  ASSERT_TRUE(state_->Unprepare("uid-a").ok());
  EXPECT_EQ(ParentSetting(mig), mode_before + "/Default");
}

// Manifests written for the public driver: TimeSlicing without timeSlicingConfig, or interval
// Default, set nothing (nvidia-smi never runs) and hold nothing.
TEST_F(MigTimeSlicingTest, NoIntervalOrDefaultChangesNothing) {
  ForbidNvidiaSmi();
  ASSERT_TRUE(state_
                  ->Prepare(Claim("uid-a", {MigOf(0)[0]},
                                  nlohmann::json::array({MigEntry({{"strategy", "TimeSlicing"}})})))
                  .ok());
  auto r = state_->Prepare(Claim("uid-b", {MigOf(0)[1]}, MigTimeSliced("Default")));
  ASSERT_TRUE(r.ok()) << r.status();
  auto stored = checkpoint_->Get("uid-b");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  for (const nlohmann::json& step : (*stored)->steps) EXPECT_NE(step["name"], "timeSlicing");
  EXPECT_TRUE(state_->Unprepare("uid-a").ok());
  EXPECT_TRUE(state_->Unprepare("uid-b").ok());
}

TEST_F(MigTimeSlicingTest, NeedsTheGate) {
  Init("a100-mig-4x");
  Configure("MPSSupport=true");
  auto r = state_->Prepare(Claim("uid-a", {MigOf(0)[0]}, MigTimeSliced("Long")));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"TimeSlicingSettings\" feature gate"));
  EXPECT_EQ(ParentSetting(MigOf(0)[0]), "Default/Default");
}

// A second claim on another MIG device of the same parent asking a different interval fails
// before anything changes, and names both claims, the device, the GPU and both intervals. The
// same interval, or Default, is fine.
TEST_F(MigTimeSlicingTest, DifferentIntervalOnTheSameParentIsRefusedAndChangesNothing) {
  const std::vector<std::string> migs = MigOf(0);
  const std::string parent = inventory_.Find(migs[0])->gpu.uuid;
  ASSERT_TRUE(state_->Prepare(Claim("uid-a", {migs[0]}, MigTimeSliced("Long"))).ok());
  ForbidNvidiaSmi();
  auto r = state_->Prepare(Claim("uid-b", {migs[1]}, MigTimeSliced("Short")));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_EQ(std::string(r.status().message()),
            "sharing.timeSlicingConfig.interval: claim ns/claim-uid-b (uid-b) asks time-slice "
            "interval Short for MIG device " +
                migs[1] + " on parent GPU " + parent +
                ", but prepared claim ns/claim-uid-a (uid-a) holds interval Long on that GPU; the "
                "time-slice interval is a setting of the physical GPU, shared by all its MIG "
                "devices: ask for the same interval, for Default, or for a MIG device of another "
                "GPU");
  EXPECT_EQ(StateOf("uid-b"), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-b")));
  RestoreNvidiaSmi();
  EXPECT_EQ(ParentSetting(migs[0]), "Default/Long");

  // Another GPU: its own interval.
  ASSERT_TRUE(state_->Prepare(Claim("uid-c", {MigOf(1)[0]}, MigTimeSliced("Short"))).ok());
  EXPECT_EQ(ParentSetting(MigOf(1)[0]), "Default/Short");
  EXPECT_EQ(ParentSetting(migs[0]), "Default/Long");
  // The refused claim succeeds once the holder is gone (the kubelet retries).
  ASSERT_TRUE(state_->Unprepare("uid-a").ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-b", {migs[1]}, MigTimeSliced("Short"))).ok());
  EXPECT_EQ(ParentSetting(migs[1]), "Default/Short");
}

TEST_F(MigTimeSlicingTest, TwoIntervalsOnOneParentInOneClaimAreRefused) {
  const std::vector<std::string> migs = MigOf(0);
  ForbidNvidiaSmi();
  k8s::ResourceClaim claim = Claim(
      "uid-a", {migs[0], migs[1]},
      nlohmann::json::array(
          {MigEntry({{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}},
                    {"gpu"}),
           MigEntry({{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Medium"}}}},
                    {"other"})}));
  claim.status.allocation->devices.results[1].request = "other";
  auto r = state_->Prepare(claim);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  const std::string msg(r.status().message());
  EXPECT_THAT(msg, HasSubstr("asks time-slice interval Medium for MIG device " + migs[1] +
                             " and Long for MIG device " + migs[0] + ", both on parent GPU " +
                             inventory_.Find(migs[0])->gpu.uuid));
  EXPECT_EQ(StateOf("uid-a"), std::nullopt);
}

// The parent is reset only after the last claim holding its interval is unprepared, decided from
// the checkpoint (a restart in between reads the records back).
TEST_F(MigTimeSlicingTest, ParentIsResetAfterTheLastClaimHoldingItsInterval) {
  const std::vector<std::string> migs = MigOf(0);
  ASSERT_TRUE(state_->Prepare(Claim("uid-a", {migs[0]}, MigTimeSliced("Long"))).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-b", {migs[1]}, MigTimeSliced("Long"))).ok());
  // A claim with no interval on the same parent holds nothing.
  ASSERT_TRUE(state_
                  ->Prepare(Claim("uid-c", {migs[2]},
                                  nlohmann::json::array({MigEntry({{"strategy", "TimeSlicing"}})})))
                  .ok());
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-a").ok());
  EXPECT_EQ(ParentSetting(migs[0]), "Default/Long");  // uid-b still holds Long
  Reopen();
  // uid-b's interval is still held: a different one is still refused.
  auto refused = state_->Prepare(Claim("uid-d", {migs[3]}, MigTimeSliced("Medium")));
  EXPECT_TRUE(api::IsPermanentConfigError(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("claim ns/claim-uid-b (uid-b)"));
  ASSERT_TRUE(state_->Unprepare("uid-b").ok());
  EXPECT_EQ(ParentSetting(migs[0]), "Default/Default");
  EXPECT_TRUE(state_->Unprepare("uid-c").ok());
}

// A prepare that set the interval and then failed at a later, non-resumable step (the CDI spec:
// here the deadline passed while the MPS daemon of its other MIG device started) resets it.
TEST_F(MigTimeSlicingTest, FailedLaterStepRollsTheIntervalBack) {
  const std::string ts_mig = MigOf(0)[0], mps_mig = MigOf(1)[0];
  k8s::ResourceClaim claim = Claim(
      "uid-a", {ts_mig, mps_mig},
      nlohmann::json::array(
          {MigEntry({{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}},
                    {"gpu"}),
           MigEntry({{"strategy", "MPS"}}, {"other"})}));
  claim.status.allocation->devices.results[1].request = "other";
  const Deadline deadline(clock_.Now() + absl::Seconds(10), "prepare of claim uid-a", &clock_);
  std::string during;
  mps_->on_start = [&] {
    during = ParentSetting(ts_mig);
    clock_.Advance(absl::Seconds(20));
  };
  auto r = state_->Prepare(claim, deadline);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("write the CDI spec: not begun"));
  EXPECT_EQ(during, "Default/Long");
  EXPECT_EQ(ParentSetting(ts_mig), "Default/Default");
  EXPECT_EQ(StateOf("uid-a"), std::nullopt);
}

// A crash after the interval was set, before the prepare completed: the record (timeSlicing
// begun) is read back after the restart, and unprepare resets the parent.
TEST_F(MigTimeSlicingTest, PartialPrepareIsUndoneAfterARestart) {
  const std::string first = MigOf(0)[0], second = MigOf(1)[0];
  const std::string real = root_path_ + "/usr/bin/nvidia-smi.real";
  WrapNvidiaSmi("case \"$*\" in *" + inventory_.Find(second)->gpu.uuid +
                "*) echo broken >&2; exit 3;; esac\nexec " + real + " \"$@\"");
  auto r = state_->Prepare(Claim("uid-a", {first, second}, MigTimeSliced("Medium")));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(
      std::string(r.status().message()),
      HasSubstr("set time-slice Medium on MIG parent GPU " + inventory_.Find(second)->gpu.uuid));
  EXPECT_EQ(StateOf("uid-a"), checkpoint::ClaimState::kPrepareStarted);
  EXPECT_EQ(ParentSetting(first), "Default/Medium");
  RestoreNvidiaSmi();
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-a").ok());
  EXPECT_EQ(ParentSetting(first), "Default/Default");
  EXPECT_EQ(StateOf("uid-a"), std::nullopt);
}

}  // namespace
}  // namespace dra::gpu
