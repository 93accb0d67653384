// DeviceState through the step engine: the step record a prepare leaves, a crash between steps
// finished by unprepare, by the cleanup and by the retried prepare (a new DeviceState over the same
// checkpoint, as after a plugin restart), a failing CDI step undoing the steps before it, a
// half-failed unprepare, and records written before steps were recorded.

#include <algorithm>

#include "lib/common/log.h"
#include "lib/common/log_capture.h"
#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/prepare/cleanup.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"
#include "lib/metrics/metrics.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Every claim is gone.
class GoneClaimApi final : public ClaimApi {
 public:
  absl::StatusOr<nlohmann::json> Get(const std::string&, const std::string& name) override {
    return absl::NotFoundError(absl::StrCat("resourceclaims \"", name, "\" not found"));
  }
  absl::StatusOr<std::vector<k8s::ResourceClaim>> ListInUseOnNode() override {
    return std::vector<k8s::ResourceClaim>{};
  }
};

nlohmann::json ConfigFor(const std::string& request, const nlohmann::json& sharing) {
  return {{"source", "FromClaim"},
          {"requests", {request}},
          {"opaque",
           {{"driver", "gpu.nvidia.com"},
            {"parameters",
             {{"apiVersion", "resource.nvidia.com/v1beta1"},
              {"kind", "GpuConfig"},
              {"sharing", sharing}}}}}};
}

class PrepareStepsTest : public DeviceStateTest {
 protected:
  void SetUp() override {
    Init("h100-8x");
    Configure("TimeSlicingSettings=true,MPSSupport=true");
  }
  // gpu-2 time-sliced Long (request "gpu"), gpu-5 shared through MPS (request "other"): a plan
  // of timeSlicing, mpsDaemons and cdiSpec.
  k8s::ResourceClaim MixedClaim(const std::string& uid) {
    k8s::ResourceClaim claim = Claim(
        uid, {"gpu-2", "gpu-5"},
        nlohmann::json::array({ConfigFor("gpu", {{"strategy", "TimeSlicing"},
                                                 {"timeSlicingConfig", {{"interval", "Long"}}}}),
                               ConfigFor("other", {{"strategy", "MPS"}})}));
    claim.status.allocation->devices.results[1].request = "other";
    return claim;
  }
  std::string DaemonId(const std::string& uid) { return MpsDaemonId(uid, {Uuid("gpu-5")}); }
  std::string CheckpointPath() { return tmp_.path() + "/plugin/checkpoint.json"; }
  checkpoint::PreparedClaim Entry(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok() && c->has_value());
    return c.ok() && c->has_value() ? **c : checkpoint::PreparedClaim{};
  }
  std::vector<std::string> StepSummary(const std::string& uid) {
    std::vector<std::string> out;
    auto steps = prepare::StepRecordsFromJson(Entry(uid).steps);
    EXPECT_TRUE(steps.ok()) << steps.status();
    for (const prepare::StepRecord& r : steps.value_or(std::vector<prepare::StepRecord>{})) {
      out.push_back(r.name + ":" + prepare::StepStateName(r.state));
    }
    return out;
  }
  // Prepares MixedClaim("uid-1") and then puts the files back as a crash would have left them
  // between the steps: time-slice set, MPS daemon begun (the checkpoint as it was when the daemon
  // started), no CDI spec. Then restarts.
  // One pass of the plugin's cleanup, for claims the API server no longer has.
  absl::Status RunCleanupOfGoneClaims() {
    metrics::Registry registry;
    DriverMetrics metrics(&registry, "gpu.nvidia.com", "node1");
    GpuDriver driver(state_.get(), tmp_.path() + "/plugin", &metrics);
    GoneClaimApi api;
    Cleanup cleanup(&api, checkpoint_.get(), cdi_.get(), state_.get(), &driver);
    return cleanup.RunOnce();
  }

  void PrepareAndCrashBetweenSteps() {
    std::string at_start;
    mps_->on_start = [&] {
      auto text = ReadFile(CheckpointPath());
      ASSERT_TRUE(text.ok()) << text.status();
      at_start = *text;
    };
    ASSERT_TRUE(state_->Prepare(MixedClaim("uid-1")).ok());
    mps_->on_start = nullptr;
    ASSERT_FALSE(at_start.empty());
    ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), at_start).ok());
    std::filesystem::remove(SpecPath("uid-1"));
    Reopen();
    ASSERT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
    ASSERT_THAT(StepSummary("uid-1"), ElementsAre("timeSlicing:applied", "mpsDaemons:begun"));
    ASSERT_EQ(GpuSetting("gpu-2"), "Default/Long");
  }
  void ExpectUndone() {
    EXPECT_EQ(GpuSetting("gpu-2"), "Default/Default");
    EXPECT_EQ(mps_->calls.back(), "stop " + DaemonId("uid-1"));
    EXPECT_EQ(StateOf("uid-1"), std::nullopt);
    EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
  }
};

TEST_F(PrepareStepsTest, CompletedClaimRecordsItsStepsInPlanOrder) {
  ASSERT_TRUE(state_->Prepare(MixedClaim("uid-1")).ok());
  const nlohmann::json steps = Entry("uid-1").steps;
  ASSERT_EQ(steps.size(), 3u) << steps.dump();
  EXPECT_EQ(steps[0],
            nlohmann::json({{"name", "timeSlicing"},
                            {"state", "applied"},
                            {"undo", {{{"interval", "Long"}, {"gpus", {Uuid("gpu-2")}}}}}}));
  EXPECT_EQ(steps[1]["name"], "mpsDaemons");
  EXPECT_EQ(steps[1]["undo"][0]["id"], DaemonId("uid-1"));
  EXPECT_EQ(steps[2], nlohmann::json({{"name", "cdiSpec"}, {"state", "applied"}}));
  // The device record keeps what older plugins read.
  EXPECT_EQ(Entry("uid-1").prepared_devices[0]["timeSliceApplied"], true);
  EXPECT_EQ(Entry("uid-1").prepared_devices[1]["mpsDaemon"]["id"], DaemonId("uid-1"));
}

TEST_F(PrepareStepsTest, CrashBetweenStepsIsUndoneByUnprepareAfterARestart) {
  PrepareAndCrashBetweenSteps();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ExpectUndone();
  EXPECT_THAT(mps_->calls, ElementsAre("start " + DaemonId("uid-1"), "ready " + DaemonId("uid-1"),
                                       "stop " + DaemonId("uid-1")));
}

TEST_F(PrepareStepsTest, CrashBetweenStepsIsUndoneByTheCleanupOnceTheClaimIsGone) {
  PrepareAndCrashBetweenSteps();
  ASSERT_TRUE(RunCleanupOfGoneClaims().ok());
  ExpectUndone();
}

// The cleanup's lines in the public driver's words (docs/compatibility.md "Log lines"): the
// unprepared stale claim at level 0, why it was stale only at -v=4.
TEST_F(PrepareStepsTest, CleanupLogsTheUnpreparedStaleClaimAtLevelZero) {
  PrepareAndCrashBetweenSteps();
  log::LogCapture logs(/*verbosity=*/0);
  absl::Status s = RunCleanupOfGoneClaims();
  ASSERT_TRUE(s.ok()) << s;
  const std::string all = logs.Text();
  EXPECT_THAT(all, HasSubstr("] \"Checkpointed RC cleanup: unprepared stale claim\" "
                             "claim=\"ns/claim-uid-1:uid-1\"\n"));
  EXPECT_THAT(all, Not(HasSubstr("is stale")));
}

TEST_F(PrepareStepsTest, CrashBetweenStepsIsFinishedByTheRetriedPrepare) {
  PrepareAndCrashBetweenSteps();
  auto devices = state_->Prepare(MixedClaim("uid-1"));
  ASSERT_TRUE(devices.ok()) << devices.status();
  // Nothing undone: the time-slice stays, the daemon is started again (idempotent), not stopped.
  const std::string id = DaemonId("uid-1");
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "start " + id, "ready " + id));
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_THAT(StepSummary("uid-1"),
              ElementsAre("timeSlicing:applied", "mpsDaemons:applied", "cdiSpec:applied"));
  EXPECT_TRUE(std::filesystem::exists(SpecPath("uid-1")));
}

// The CDI step is not resumable: when it fails (here: the deadline passed while the daemon
// started), the daemon and the time-slice applied before it are undone at once.
TEST_F(PrepareStepsTest, FailingCdiStepUndoesTheStepsBeforeItInReverse) {
  const Deadline deadline(clock_.Now() + absl::Seconds(10), "prepare of claim uid-1", &clock_);
  mps_->on_start = [&] { clock_.Advance(absl::Seconds(20)); };
  auto r = state_->Prepare(MixedClaim("uid-1"), deadline);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("write the CDI spec: not begun"));
  const std::string id = DaemonId("uid-1");
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "stop " + id));
  ExpectUndone();
}

// Unprepare undoes in reverse (spec, daemon, time-slice) and stops at a failure: the steps not
// undone stay on record, the claim PrepareStarted, for the kubelet's retry or the cleanup.
TEST_F(PrepareStepsTest, UnprepareThatFailsHalfWayKeepsTheRestForTheRetry) {
  ASSERT_TRUE(state_->Prepare(MixedClaim("uid-1")).ok());
  mps_->stop_status = absl::DeadlineExceededError("pods still present");
  absl::Status s = state_->Unprepare("uid-1");
  EXPECT_THAT(std::string(s.message()), HasSubstr("pods still present"));
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");  // not reached
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  EXPECT_THAT(StepSummary("uid-1"), ElementsAre("timeSlicing:applied", "mpsDaemons:applied"));
  EXPECT_EQ(state_->PreparedDeviceCounts()["gpu"], 0);

  mps_->stop_status = absl::OkStatus();
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ExpectUndone();
}

// Records of plugins that did not record steps: unprepare derives them from the devices.
TEST_F(PrepareStepsTest, OldFormatCompletedRecordStillUnprepares) {
  ASSERT_TRUE(state_->Prepare(MixedClaim("uid-1")).ok());
  ASSERT_TRUE(checkpoint_
                  ->Update([](checkpoint::ClaimMap& claims) {
                    claims["uid-1"].steps = nullptr;
                    return absl::OkStatus();
                  })
                  .ok());
  Reopen();
  auto text = ReadFile(CheckpointPath());
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, ::testing::Not(HasSubstr("\"steps\"")));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ExpectUndone();
}

// An unfinished prepare of an older plugin: its time-slice record has no interval, so the retry
// cannot tell it is the same and rolls everything back before it prepares again (as that plugin
// did for time-slices).
TEST_F(PrepareStepsTest, OldFormatStartedRecordIsRolledBackAndPreparedAgain) {
  PrepareAndCrashBetweenSteps();
  ASSERT_TRUE(checkpoint_
                  ->Update([](checkpoint::ClaimMap& claims) {
                    claims["uid-1"].steps = nullptr;
                    return absl::OkStatus();
                  })
                  .ok());
  Reopen();
  ASSERT_TRUE(state_->Prepare(MixedClaim("uid-1")).ok());
  const std::string id = DaemonId("uid-1");
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "stop " + id, "start " + id,
                                       "ready " + id));
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
}

TEST(LegacyStepsTest, DerivedFromTheDevices) {
  RecordedDevice sliced{
      .kubelet = {.device_name = "gpu-0"}, .type = DeviceType::kGpu, .uuid = "GPU-0"};
  sliced.time_slice_applied = true;
  RecordedDevice old{
      .kubelet = {.device_name = "gpu-1"}, .type = DeviceType::kGpu, .uuid = "GPU-1"};  // no flag
  RecordedDevice mps{
      .kubelet = {.device_name = "gpu-2"}, .type = DeviceType::kGpu, .uuid = "GPU-2"};
  mps.time_slice_applied = false;
  mps.mps_daemon = MpsDaemonRecord{.id = "d", .ns = "ns", .full_gpu_uuids = {"GPU-2"}};
  RecordedDevice mps2 = mps;  // same daemon: listed once
  mps2.kubelet.device_name = "gpu-3";

  auto summary = [](const std::vector<prepare::StepRecord>& steps) {
    return prepare::StepRecordsToJson(steps);
  };
  EXPECT_EQ(summary(LegacySteps({sliced, old, mps, mps2}, true, /*time_slicing_gate=*/true)),
            nlohmann::json::parse(R"([
              {"name":"timeSlicing","state":"applied","undo":[{"gpus":["GPU-0","GPU-1"]}]},
              {"name":"mpsDaemons","state":"applied",
               "undo":[{"fullGpuUUIDs":["GPU-2"],"id":"d","namespace":"ns"}]},
              {"name":"cdiSpec","state":"applied"}])"));
  EXPECT_EQ(summary(LegacySteps({sliced, old}, false, /*time_slicing_gate=*/false)),
            nlohmann::json::parse(R"([
              {"name":"timeSlicing","state":"begun","undo":[{"gpus":["GPU-0"]}]},
              {"name":"cdiSpec","state":"begun"}])"));
}

// Every step name a GPU claim's record can hold, in plan order (the constants of the steps'
// headers).
const std::vector<std::string> kRecordableStepNames = {
    kFabricPartitionStep, kMigDevicesStep,      kTimeSlicingStep, kMpsDaemonsStep,
    kVfioModuleStep,      kVfioPersistenceStep, kVfioUnbindStep,  kVfioBindStep,
    kVfioCdiEditsStep,    kDeviceMetadataStep,  kCdiSpecStep,     kDeviceStatusStep};

std::vector<std::string> StepNames(const prepare::PlanSteps& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) out.push_back(s->name());
  return out;
}

TEST(GpuStepTableTest, NamesAreUniqueInPlanOrderAndEveryKindPlansAndUndoes) {
  ASSERT_TRUE(prepare::CheckStepTable(GpuStepTable()).ok())
      << prepare::CheckStepTable(GpuStepTable());
  std::vector<std::string> names;
  for (const GpuStepKind& kind : GpuStepTable()) {
    for (std::string_view name : kind.names) names.emplace_back(name);
  }
  EXPECT_EQ(names, kRecordableStepNames);
}

TEST(GpuStepTableTest, EveryNameARecordCanHoldHasAnUndoer) {
  const checkpoint::ClaimMap none;
  const VfioHost host;
  const prepare::StepUndoers undoers = GpuClaimUndoers("uid", none, {.vfio = &host});
  for (const std::string& name : kRecordableStepNames) {
    EXPECT_TRUE(undoers.contains(name)) << name;
  }
  EXPECT_EQ(undoers.size(), kRecordableStepNames.size());
  // The names a record without steps implies (LegacySteps) are among them.
  RecordedDevice gpu{.kubelet = {.device_name = "gpu-0"}, .uuid = "GPU-0"};
  gpu.mps_daemon = MpsDaemonRecord{.id = "d"};
  for (const prepare::StepRecord& r : LegacySteps({gpu}, true, true)) {
    EXPECT_TRUE(undoers.contains(r.name)) << r.name;
  }
  // Without a VFIO host the binds have no undoer (as before the table); vfioCdiEdits has one.
  const prepare::StepUndoers without_vfio = GpuClaimUndoers("uid", none, {});
  EXPECT_FALSE(without_vfio.contains(kVfioBindStep));
  EXPECT_TRUE(without_vfio.contains(kVfioCdiEditsStep));
  EXPECT_EQ(without_vfio.size(), kRecordableStepNames.size() - 4);
}

TEST(GpuStepTableTest, PlansEachKindTheClaimNeedsInTableOrder) {
  const VfioHost host;
  ClaimStepsInput in{.claim_uid = "uid"};
  in.time_slices = {{.gpu_uuids = {"GPU-0"}}};
  in.cdi_devices = {{.kubelet = {.device_name = "gpu-0"}, .uuid = "GPU-0"}};
  in.status_claim = StatusClaimRef{.namespace_name = "ns", .name = "c", .uid = "uid"};
  in.metadata = MetadataClaim{.uid = "uid", .namespace_name = "ns", .name = "c"};
  in.vfio = {{.bus_id = "0000:65:00.0", .module = "vfio_pci"}};
  in.vfio_cdi = {{.device = "gpu-vfio-0"}};
  // The fabric entry plans from the claim's devices: gpu-0 is module 1, partition 1's only one.
  const FabricPartitioning fabric{.partitions = {{.id = 1, .module_ids = {1}}},
                                  .module_by_bus_id = {{"0000:18:00.0", 1}}};
  in.devices = {{.kubelet = {.device_name = "gpu-0"},
                 .type = DeviceType::kGpu,
                 .uuid = "GPU-0",
                 .pci_bus_id = "0000:18:00.0"}};
  RecordedDevice mig{.kubelet = {.device_name = "gpu-1-mig-1g"}, .type = DeviceType::kMig};
  mig.mig = MigInfo{.parent_uuid = "GPU-1", .profile = "1g.10gb", .dynamic = true};
  in.cdi_devices.push_back(mig);
  in.mps = {{.device_names = {"gpu-1-mig-1g"}}};  // planned only: the daemon is not read
  absl::StatusOr<GpuPlan> plan = GpuClaimSteps(in, {.vfio = &host, .fabric = &fabric});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(StepNames(plan->steps),
              ElementsAre(kFabricPartitionStep, kMigDevicesStep, kTimeSlicingStep, kMpsDaemonsStep,
                          kVfioModuleStep, kVfioPersistenceStep, kVfioUnbindStep, kVfioBindStep,
                          kVfioCdiEditsStep, kDeviceMetadataStep, kCdiSpecStep, kDeviceStatusStep));
  // What the docs' table says of each kind is what its steps are.
  for (const auto& step : plan->steps) {
    const GpuStepKind* kind = nullptr;
    for (const GpuStepKind& k : GpuStepTable()) {
      if (std::find(k.names.begin(), k.names.end(), step->name()) != k.names.end()) kind = &k;
    }
    ASSERT_NE(kind, nullptr) << step->name();
    EXPECT_EQ(kind->doc.external, step->external()) << step->name();
    EXPECT_EQ(kind->doc.resumable, step->resumable()) << step->name();
    EXPECT_EQ(kind->doc.best_effort, step->best_effort()) << step->name();
  }

  absl::StatusOr<GpuPlan> minimal = GpuClaimSteps({.claim_uid = "uid"}, {});
  ASSERT_TRUE(minimal.ok()) << minimal.status();
  EXPECT_THAT(StepNames(minimal->steps), ElementsAre(kCdiSpecStep));
}

TEST(GpuStepTableTest, StepsReadTheContextOfTheirPlanAfterThePlanMoved) {
  RecordedDevice mig{.kubelet = {.device_name = "gpu-0-mig-1g"}, .type = DeviceType::kMig};
  mig.mig = MigInfo{.parent_uuid = "GPU-0", .profile = "1g.10gb", .dynamic = true};
  absl::StatusOr<GpuPlan> planned = GpuClaimSteps({.claim_uid = "uid", .cdi_devices = {mig}}, {});
  ASSERT_TRUE(planned.ok()) << planned.status();
  GpuPlan plan = *std::move(planned);
  ASSERT_EQ(StepNames(plan.steps)[0], kMigDevicesStep);
  EXPECT_FALSE(plan.steps[0]->UndoData()[0].contains("uuid"));
  // What migDevices' Apply writes into the context, its undo data (and cdiSpec) read.
  plan.context->created_mig["gpu-0-mig-1g"] = MigInfo{.uuid = "MIG-1"};
  EXPECT_EQ(plan.steps[0]->UndoData()[0]["uuid"], "MIG-1");
}

TEST(GpuStepTableTest, MarkdownHasOneRowPerKind) {
  const std::string md = GpuStepTableMarkdown();
  EXPECT_THAT(md, HasSubstr("| `fabricPartition` | gate FabricManagerPartitioning"));
  EXPECT_THAT(md, HasSubstr("| `vfioModule`, `vfioPersistence`, `vfioUnbind`, `vfioBind` |"));
  EXPECT_EQ(static_cast<size_t>(std::count(md.begin(), md.end(), '\n')), 2 + GpuStepTable().size());
}

}  // namespace
}  // namespace dra::gpu
