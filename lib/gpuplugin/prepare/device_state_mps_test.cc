// DeviceState with MPS sharing: daemon records, start, readiness, CDI edits and stop, against a
// fake daemon factory.

#include "lib/api/test_util.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A claim config entry: `kind` with MPS sharing and these mpsConfig fields, for all requests.
nlohmann::json MpsEntry(const nlohmann::json& mps_config, const std::string& kind = "GpuConfig") {
  nlohmann::json sharing = {{"strategy", "MPS"}};
  if (!mps_config.is_null()) sharing["mpsConfig"] = mps_config;
  return nlohmann::json::array({{{"source", "FromClaim"},
                                 {"requests", nlohmann::json::array()},
                                 {"opaque",
                                  {{"driver", "gpu.nvidia.com"},
                                   {"parameters",
                                    {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                     {"kind", kind},
                                     {"sharing", sharing}}}}}}});
}

TEST_F(DeviceStateTest, MpsRecordsTheDaemonBeforeStartWaitsAndAddsCdiEdits) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-2"), Uuid("gpu-5")});
  std::optional<checkpoint::PreparedClaim> at_start;
  mps_->on_start = [&] {
    auto c = checkpoint_->Get("uid-1");
    ASSERT_TRUE(c.ok()) << c.status();
    at_start = *c;
  };
  const absl::Time begin = clock_.Now();
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-5"},
                                       MpsEntry({{"defaultActiveThreadPercentage", 50},
                                                 {"defaultPinnedDeviceMemoryLimit", "10Gi"}})));
  ASSERT_TRUE(devices.ok()) << devices.status();

  ASSERT_EQ(mps_->groups.size(), 1u);
  const MpsDaemonGroup& g = mps_->groups[0];
  EXPECT_EQ(g.claim_uid, "uid-1");
  EXPECT_THAT(g.device_uuids, ElementsAre(Uuid("gpu-2"), Uuid("gpu-5")));
  EXPECT_THAT(g.full_gpu_uuids, ElementsAre(Uuid("gpu-2"), Uuid("gpu-5")));
  EXPECT_EQ(g.config.default_active_thread_percentage, 50);
  EXPECT_EQ(g.pinned_memory_limits_mib,
            (std::map<std::string, int64_t>{{Uuid("gpu-2"), 10240}, {Uuid("gpu-5"), 10240}}));
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id));
  ASSERT_EQ(mps_->deadlines.size(), 1u);
  EXPECT_EQ(mps_->deadlines[0], begin + absl::Seconds(30));

  // Before the daemon started, the checkpoint already named it.
  ASSERT_TRUE(at_start.has_value());
  EXPECT_EQ(at_start->state, checkpoint::ClaimState::kPrepareStarted);
  EXPECT_EQ(at_start->prepared_devices[0]["mpsDaemon"]["id"], id);
  EXPECT_EQ(at_start->prepared_devices[1]["mpsDaemon"]["fullGpuUUIDs"],
            nlohmann::json({Uuid("gpu-2"), Uuid("gpu-5")}));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].mps_daemon->id, id);

  // Both CDI devices carry the daemon's edits.
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto j = nlohmann::json::parse(*spec);
  ASSERT_EQ(j["devices"].size(), 2u);
  for (const nlohmann::json& d : j["devices"]) {
    EXPECT_THAT(d["containerEdits"]["env"].dump(),
                HasSubstr("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"))
        << d.dump();
    EXPECT_THAT(d["containerEdits"]["mounts"].dump(), HasSubstr("/data/mps/" + id + "/pipe"));
  }

  // A repeated prepare starts nothing; unprepare stops the daemon once.
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-5"})).ok());
  EXPECT_EQ(mps_->calls.size(), 2u);
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "stop " + id));
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
}

TEST_F(DeviceStateTest, MpsDaemonNotReadyLeavesClaimStartedAndRetryCompletesIt) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-4")});
  mps_->ready_status = absl::UnavailableError("pod Pending: ErrImageNeverPull");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-4"}, MpsEntry(nullptr)));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ErrImageNeverPull"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((**stored).prepared_devices[0]["mpsDaemon"]["id"], id);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));

  // The retry keeps the daemon (no stop) and completes it.
  mps_->ready_status = absl::OkStatus();
  Reopen();
  auto retry = state_->Prepare(Claim("uid-1", {"gpu-4"}, MpsEntry(nullptr)));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "start " + id, "ready " + id));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_TRUE(std::filesystem::exists(SpecPath("uid-1")));
}

// The cleanup unprepares a claim whose prepare failed after the daemon started; a failing stop
// keeps the claim for the next try.
TEST_F(DeviceStateTest, UnprepareOfStartedMpsClaimStopsTheDaemonAndKeepsTheClaimOnFailure) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-0"), Uuid("gpu-1")});
  mps_->start_status = absl::InternalError("create Deployment: forbidden");
  ASSERT_FALSE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"}, MpsEntry(nullptr))).ok());
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);

  mps_->stop_status = absl::DeadlineExceededError("pods still present");
  auto s = state_->Unprepare("uid-1");
  EXPECT_THAT(std::string(s.message()), HasSubstr("pods still present"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);

  mps_->stop_status = absl::OkStatus();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "stop " + id, "stop " + id));
}

TEST_F(DeviceStateTest, ClaimsWithoutMpsNeverTouchDaemons) {
  Init("h100-8x");
  Configure("MPSSupport=true,TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-1"}, TimeSliced("Short"))).ok());
  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_FALSE((**stored).prepared_devices[0].contains("mpsDaemon"));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_TRUE(mps_->calls.empty());
  EXPECT_TRUE(mps_->groups.empty());
}

TEST_F(DeviceStateTest, MpsNeedsTheGate) {
  Init("h100-8x");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(nullptr)));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("\"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" "
                        "feature gate is not enabled"));
  EXPECT_TRUE(mps_->groups.empty());
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

TEST_F(DeviceStateTest, MpsConfigErrorsArePermanentAndStartNothing) {
  struct Case {
    std::string name;
    nlohmann::json mps_config;
    std::string message;
  };
  const Case cases[] = {
      {"index beyond the group",
       {{"defaultPerDevicePinnedMemoryLimit", {{"3", "1Gi"}}}},
       "invalid device: invalid device index: 3"},
      {"limit below 1 MiB",
       {{"defaultPinnedDeviceMemoryLimit", "100Ki"}},
       "invalid limit: default value set too low"},
      {"multi-user on a GPU before Volta",
       {{"multiUser", true}},
       "device gpu-0 (" + std::string("%UUID%") +
           ") has compute capability 6.1; multi-user MPS "
           "needs 7.0 (Volta) or newer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Init("h100-8x");
    // gpu-0 as a Pascal GPU.
    for (AllocatableDevice& d : inventory_.devices) {
      if (d.name == "gpu-0") {
        d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::Version("6.1.0");
      }
    }
    Configure("MPSSupport=true");
    auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(c.mps_config)));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
    std::string want = c.message;
    if (auto pos = want.find("%UUID%"); pos != std::string::npos) {
      want.replace(pos, 6, Uuid("gpu-0"));
    }
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(want));
    EXPECT_TRUE(mps_->groups.empty());
    EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  }
}

TEST_F(DeviceStateTest, MultiUserMpsOnVoltaOrNewerIsAccepted) {
  for (const char* profile : {"t4-2x", "h100-8x"}) {  // compute capability 7.5 and 9.0
    SCOPED_TRACE(profile);
    Init(profile);
    Configure("MPSSupport=true");
    auto r = state_->Prepare(Claim("uid-1", {"gpu-1"}, MpsEntry({{"multiUser", true}})));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(mps_->groups.size(), 1u);
    EXPECT_EQ(mps_->groups[0].config.multi_user, true);
  }
}

TEST_F(DeviceStateTest, ComputeCapabilityComesFromThePublishedAttribute) {
  AllocatableDevice d;
  EXPECT_EQ(ComputeCapabilityOf(d), std::nullopt);
  d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::Version("7.5.0");
  EXPECT_EQ(ComputeCapabilityOf(d), std::make_pair(7, 5));
  d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::Version("10.0.0");
  EXPECT_EQ(ComputeCapabilityOf(d), std::make_pair(10, 0));
  d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::String("x");
  EXPECT_EQ(ComputeCapabilityOf(d), std::nullopt);
}

TEST_F(DeviceStateTest, MpsOnAMigDeviceHasNoComputeModeToSet) {
  Init("a100-mig-4x");
  Configure("MPSSupport=true");
  const AllocatableDevice* mig = nullptr;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig) {
      mig = &d;
      break;
    }
  }
  ASSERT_NE(mig, nullptr);
  auto r = state_->Prepare(Claim(
      "uid-m", {mig->name}, MpsEntry({{"defaultActiveThreadPercentage", 20}}, "MigDeviceConfig")));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(mps_->groups.size(), 1u);
  EXPECT_THAT(mps_->groups[0].device_uuids, ElementsAre(mig->mig->uuid));
  EXPECT_TRUE(mps_->groups[0].full_gpu_uuids.empty());
  ASSERT_TRUE(state_->Unprepare("uid-m").ok());
  EXPECT_EQ(mps_->calls.back(), "stop " + MpsDaemonId("uid-m", {mig->mig->uuid}));
}

// MPS and DynamicMIG work together (dynamic_mig_prepare_test.cc): with both gates a full GPU
// still gets its daemon as without DynamicMIG.
TEST_F(DeviceStateTest, MpsOnAFullGpuWithDynamicMigGate) {
  Init("h100-8x");
  Configure("MPSSupport=true,DynamicMIG=true");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(nullptr)));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(mps_->groups.size(), 1u);
  EXPECT_THAT(mps_->groups[0].device_uuids, ElementsAre(Uuid("gpu-0")));
  EXPECT_TRUE(mps_->groups[0].id.empty());
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-0")});
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id));
}

TEST_F(DeviceStateTest, MpsWithoutADaemonFactoryIsAnInternalError) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  state_ = std::make_unique<DeviceState>(
      inventory_, cdi_.get(), checkpoint_.get(),
      DeviceState::Options{.pool_name = "node1", .gates = gates_.get()});
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(nullptr)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

}  // namespace
}  // namespace dra::gpu
