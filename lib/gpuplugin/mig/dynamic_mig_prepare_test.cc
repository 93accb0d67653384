// A dynamic MIG claim through DeviceState and the step engine, against the mock NVML: prepare
// creates the MIG device (MIG mode on, GPU instance at the allocated placement, compute instance)
// and records its UUID; unprepare destroys it and turns MIG mode back off (H100). A crash is
// injected at each point of the migDevices step (a forked child prepares and exits at the point);
// after the "restart" (a new DeviceState over the same checkpoint) the retried prepare finishes the
// device, or an unprepare without retry, or the cleanup once the claim is gone, removes what the
// crash left: no GPU instance stays behind. A failing later step (the CDI spec) rolls the MIG
// device back.

#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "lib/gpuplugin/mig/mig_manager.h"
#include "lib/gpuplugin/prepare/cleanup.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"
#include "lib/metrics/metrics.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GoneClaims final : public ClaimApi {
 public:
  absl::StatusOr<nlohmann::json> Get(const std::string&, const std::string& name) override {
    return absl::NotFoundError(absl::StrCat("resourceclaims \"", name, "\" not found"));
  }
  absl::StatusOr<std::vector<k8s::ResourceClaim>> ListInUseOnNode() override {
    return std::vector<k8s::ResourceClaim>{};
  }
};

constexpr char kDevice[] = "gpu-0-mig-3g40gb-9-4";

class DynamicMigPrepareTest : public DeviceStateTest {
 protected:
  void SetUp() override {
    Init("h100-8x");
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::make_unique<nvml::Session>(std::move(*session));
    auto inventory = Discover(*session_, {.sysfs_root = tmp_.path() + "/sys", .dynamic_mig = true});
    ASSERT_TRUE(inventory.ok()) << inventory.status();
    inventory_ = *std::move(inventory);
    ReopenDynamic();
  }
  // As after a plugin restart: a new checkpoint handle, MIG manager and DeviceState.
  void ReopenDynamic() {
    state_.reset();
    mig_ = std::make_unique<MigManager>(session_.get());
    auto cp = checkpoint::Checkpoint::Open(tmp_.path() + "/plugin", tmp_.path() + "/boot_id", {});
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = std::move(*cp);
    state_ = std::make_unique<DeviceState>(
        inventory_, cdi_.get(), checkpoint_.get(),
        DeviceState::Options{
            .pool_name = "node1",
            .gates = gates_.get(),
            .services = {
                .time_slicing = time_slicing_.get(), .mps = mps_.get(), .mig = mig_.get()}});
  }
  // "off", or "on" and each GPU instance of GPU 0 as "<profile id>@<start>/ci<compute instances>".
  std::string MigState() {
    auto gpu = session_->DeviceByIndex(0);
    if (!gpu.ok()) return gpu.status().ToString();
    auto mode = gpu->MigMode();
    if (!mode.ok()) return mode.status().ToString();
    if (!mode->current_enabled) return "off";
    std::string out = "on";
    const std::vector<nvml::GpuInstance> gis =
        gpu->AllGpuInstances().value_or(std::vector<nvml::GpuInstance>{});
    for (const nvml::GpuInstance& gi : gis) {
      const nvml::GpuInstanceInfo info = gi.Info().value_or(nvml::GpuInstanceInfo{});
      size_t n = 0;
      for (const auto& p :
           gi.ComputeInstanceProfiles().value_or(std::vector<nvml::ComputeInstanceProfile>{})) {
        n += gi.ComputeInstances(p).value_or(std::vector<nvml::ComputeInstance>{}).size();
      }
      absl::StrAppend(&out, " ", info.profile_id, "@", info.placement.start, "/ci", n);
    }
    return out;
  }
  nlohmann::json MigRecord(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok() && c->has_value());
    if (!c.ok() || !c->has_value()) return nullptr;
    for (const auto& s : (*c)->steps) {
      if (s["name"] == "migDevices") return s;
    }
    return nullptr;
  }
  // Prepares "uid-1" in a child process that exits at `stage` of the MIG manager, then restarts.
  void CrashAt(const std::string& stage) {
    const k8s::ResourceClaim claim = Claim("uid-1", {kDevice});
    fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      mig_->set_stage_hook([&stage](const char* s) {
        if (stage == s) _exit(42);
      });
      (void)state_->Prepare(claim);
      _exit(1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 42) << "the child did not reach " << stage;
    ReopenDynamic();
    EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
    EXPECT_EQ(MigRecord("uid-1")["state"], "begun");
  }

  std::unique_ptr<nvml::Session> session_;
  std::unique_ptr<MigManager> mig_;
};

TEST_F(DynamicMigPrepareTest, PrepareCreatesRecordsAndUnprepareDestroys) {
  EXPECT_EQ(MigState(), "off");
  auto prepared = state_->Prepare(Claim("uid-1", {kDevice}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(MigState(), "on 9@4/ci1");
  const nlohmann::json record = MigRecord("uid-1");
  EXPECT_EQ(record["state"], "applied");
  const std::string uuid = record["undo"][0].value("uuid", "");
  EXPECT_TRUE(absl::StartsWith(uuid, "MIG-")) << record.dump();
  EXPECT_EQ(record["undo"][0]["device"], kDevice);
  EXPECT_EQ(record["undo"][0]["start"], 4);
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  // The CDI spec names the created device: its two capability nodes (GPU and compute instance).
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(*spec, HasSubstr("nvidia-caps/nvidia-cap"));
  // A repeated prepare of the completed claim changes nothing.
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {kDevice})).ok());
  EXPECT_EQ(MigState(), "on 9@4/ci1");

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(MigState(), "off");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
}

// MPSSupport with DynamicMIG: the MPS daemon of a dynamic MIG device is recorded (PrepareStarted)
// under an id made from the device's name, and started once migDevices created the device, with
// its UUID (CUDA_VISIBLE_DEVICES) and that same id; unprepare stops it and destroys the device.
TEST_F(DynamicMigPrepareTest, MpsOnADynamicMigDeviceStartsWithTheCreatedUuid) {
  ASSERT_TRUE(gates_->Set("MPSSupport=true").ok());
  ReopenDynamic();
  const nlohmann::json config = nlohmann::json::array({MigEntry(
      {{"strategy", "MPS"}, {"mpsConfig", {{"defaultPinnedDeviceMemoryLimit", "1Gi"}}}})});
  std::string mig_state_at_start;
  mps_->on_start = [&] { mig_state_at_start = MigState(); };
  auto prepared = state_->Prepare(Claim("uid-1", {kDevice}, config));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(mig_state_at_start, "on 9@4/ci1") << "the daemon starts after the device exists";
  const std::string uuid = MigRecord("uid-1")["undo"][0].value("uuid", "");
  ASSERT_TRUE(absl::StartsWith(uuid, "MIG-")) << uuid;
  // Planned with the stand-in, started with the UUID, under the planned id.
  ASSERT_EQ(mps_->groups.size(), 2u);
  EXPECT_THAT(mps_->groups[0].device_uuids, ElementsAre(DynamicMigUuidPlaceholder(kDevice)));
  const std::string id = mps_->groups[0].id;
  EXPECT_EQ(id, MpsDaemonId("uid-1", {DynamicMigUuidPlaceholder(kDevice)}));
  EXPECT_THAT(mps_->groups[1].device_uuids, ElementsAre(uuid));
  EXPECT_EQ(mps_->groups[1].id, id);
  EXPECT_EQ(mps_->groups[1].pinned_memory_limits_mib,
            (std::map<std::string, int64_t>{{uuid, 1024}}));
  EXPECT_TRUE(mps_->groups[1].full_gpu_uuids.empty());
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id));
  ASSERT_EQ(prepared->size(), 1u);
  ASSERT_TRUE((*prepared)[0].mps_daemon.has_value());
  EXPECT_EQ((*prepared)[0].mps_daemon->id, id);
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(*spec, HasSubstr("/data/mps/" + id + "/pipe"));

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(mps_->calls.back(), "stop " + id);
  EXPECT_EQ(MigState(), "off");
}

// TimeSlicingSettings with DynamicMIG: a MigDeviceConfig's interval goes to the parent GPU once
// migDevices created the device (time_slicing.h), and unprepare resets it before destroying it.
TEST_F(DynamicMigPrepareTest, MigIntervalIsSetOnTheParentAfterTheDeviceIsCreated) {
  ASSERT_TRUE(gates_->Set("TimeSlicingSettings=true").ok());
  ReopenDynamic();
  const nlohmann::json config = MigTimeSliced("Long");
  auto prepared = state_->Prepare(Claim("uid-1", {kDevice}, config));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(MigState(), "on 9@4/ci1");
  EXPECT_EQ(GpuSetting(kDevice), "Default/Long");
  auto c = checkpoint_->Get("uid-1");
  ASSERT_TRUE(c.ok() && c->has_value());
  ASSERT_GE((*c)->steps.size(), 2u);
  EXPECT_EQ((*c)->steps[0]["name"], "migDevices");
  EXPECT_EQ((*c)->steps[1]["name"], "timeSlicing");
  EXPECT_EQ((*c)->steps[1]["undo"][0]["gpus"][0], Uuid(kDevice));
  EXPECT_EQ((*c)->steps[1]["undo"][0]["migParents"], true);

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting(kDevice), "Default/Default");
  EXPECT_EQ(MigState(), "off");
}

TEST_F(DynamicMigPrepareTest, TwoClaimsKeepMigOnUntilTheLastIsGone) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {kDevice})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-0-mig-1g10gb-19-0"})).ok());
  EXPECT_EQ(MigState(), "on 9@4/ci1 19@0/ci1");  // by GPU instance id
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(MigState(), "on 19@0/ci1");
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_EQ(MigState(), "off");
}

// adminAccess (KEP-5018) observes devices; a dynamic MIG device exists only through its holder's
// prepare, and an admin claim's prepare or unprepare must not create or destroy it.
TEST_F(DynamicMigPrepareTest, AdminAccessToADynamicMigDeviceIsRefusedAndChangesNothing) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {kDevice})).ok());
  ASSERT_EQ(MigState(), "on 9@4/ci1");
  for (const std::string& device : {std::string(kDevice), std::string("gpu-0-mig-1g10gb-19-0")}) {
    SCOPED_TRACE(device);  // held by uid-1, and free
    k8s::ResourceClaim admin = Claim("admin", {device});
    admin.status.allocation->devices.results[0].admin_access = true;
    auto prepared = state_->Prepare(admin);
    ASSERT_FALSE(prepared.ok());
    EXPECT_TRUE(api::IsPermanentConfigError(prepared.status())) << prepared.status();
    EXPECT_THAT(std::string(prepared.status().message()),
                HasSubstr("adminAccess to dynamic MIG device " + device + " is not supported"));
    EXPECT_EQ(MigState(), "on 9@4/ci1");
    EXPECT_EQ(StateOf("admin"), std::nullopt);
    ASSERT_TRUE(state_->Unprepare("admin").ok());
    EXPECT_EQ(MigState(), "on 9@4/ci1");
  }
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(MigState(), "off");
}

TEST_F(DynamicMigPrepareTest, FailingCdiStepRollsTheMigDeviceBack) {
  // A file where the CDI spec directory should be: the spec cannot be written.
  std::filesystem::remove_all(tmp_.path() + "/cdi");
  std::ofstream(tmp_.path() + "/cdi") << "not a directory";
  auto prepared = state_->Prepare(Claim("uid-1", {kDevice}));
  EXPECT_FALSE(prepared.ok());
  EXPECT_EQ(MigState(), "off");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

class CrashTest : public DynamicMigPrepareTest,
                  public ::testing::WithParamInterface<std::string> {};

TEST_P(CrashTest, RetriedPrepareFinishesTheDeviceAndUnprepareRemovesIt) {
  CrashAt(GetParam());
  auto prepared = state_->Prepare(Claim("uid-1", {kDevice}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(MigState(), "on 9@4/ci1");
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_TRUE(absl::StartsWith(MigRecord("uid-1")["undo"][0].value("uuid", ""), "MIG-"));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(MigState(), "off");
}

TEST_P(CrashTest, UnprepareWithoutRetryLeavesNothing) {
  CrashAt(GetParam());
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(MigState(), "off");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

TEST_P(CrashTest, CleanupOnceTheClaimIsGoneLeavesNothing) {
  CrashAt(GetParam());
  metrics::Registry registry;
  DriverMetrics metrics(&registry, "gpu.nvidia.com", "node1");
  GpuDriver driver(state_.get(), tmp_.path() + "/plugin", &metrics);
  GoneClaims api;
  Cleanup cleanup(&api, checkpoint_.get(), cdi_.get(), state_.get(), &driver);
  ASSERT_TRUE(cleanup.RunOnce().ok());
  EXPECT_EQ(MigState(), "off");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(EachStage, CrashTest,
                         ::testing::Values("start", "migMode", "gpuInstance", "computeInstance"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dra::gpu
