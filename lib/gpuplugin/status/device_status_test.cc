// Device status on claims (device_status.h): the apply body, the undo data, and DeviceState's
// deviceStatus step with a recording writer: written after the CDI spec, best effort (skipped
// when too little of the deadline is left), recorded
// even when the write failed, removed at unprepare (a failed removal is retried, a refused one is
// not worth blocking the unprepare), left out with --device-status=false.

#include "lib/gpuplugin/status/device_status.h"

#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records the calls; fails them while the matching status is set.
class RecordingWriter final : public DeviceStatusWriter {
 public:
  absl::Status Write(const StatusClaimRef& claim,
                     const std::vector<DeviceStatusEntry>& entries) const override {
    writes.push_back({claim, entries});
    if (on_write) on_write();
    return write_error;
  }
  absl::Status Remove(const StatusClaimRef& claim) const override {
    removes.push_back(claim);
    return remove_error;
  }
  mutable std::vector<std::pair<StatusClaimRef, std::vector<DeviceStatusEntry>>> writes;
  mutable std::vector<StatusClaimRef> removes;
  std::function<void()> on_write;
  absl::Status write_error;
  absl::Status remove_error;
};

TEST(DeviceStatusBodyTest, FullGpuEntryWithReadyCondition) {
  GpuInfo gpu{.uuid = "GPU-1", .product_name = "NVIDIA H100 80GB HBM3"};
  AllocatableDevice d{.name = "gpu-0", .type = DeviceType::kGpu, .gpu = gpu};
  const nlohmann::json body = DeviceStatusApplyBody(
      "gpu.nvidia.com", {.namespace_name = "ns", .name = "c", .uid = "u-1", .generation = 3},
      {{.pool = "node1", .device = "gpu-0", .data = DeviceStatusData(d)}},
      absl::FromUnixSeconds(0));
  EXPECT_EQ(body["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(body["kind"], "ResourceClaim");
  EXPECT_EQ(body["metadata"], nlohmann::json({{"name", "c"}, {"namespace", "ns"}, {"uid", "u-1"}}));
  ASSERT_EQ(body["status"]["devices"].size(), 1u);
  const nlohmann::json& e = body["status"]["devices"][0];
  EXPECT_EQ(e["driver"], "gpu.nvidia.com");
  EXPECT_EQ(e["pool"], "node1");
  EXPECT_EQ(e["device"], "gpu-0");
  EXPECT_FALSE(e.contains("shareID"));
  EXPECT_EQ(e["data"],
            nlohmann::json({{"uuid", "GPU-1"}, {"productName", "NVIDIA H100 80GB HBM3"}}));
  ASSERT_EQ(e["conditions"].size(), 1u);
  EXPECT_EQ(e["conditions"][0], nlohmann::json({{"type", "Ready"},
                                                {"status", "True"},
                                                {"reason", "DevicePrepared"},
                                                {"message",
                                                 "prepared by the kubelet plugin on "
                                                 "node node1"},
                                                {"lastTransitionTime", "1970-01-01T00:00:00Z"},
                                                {"observedGeneration", 3}}));
}

TEST(DeviceStatusBodyTest, MigDataShareIdAndEmptyRemoval) {
  GpuInfo gpu{.uuid = "GPU-P", .product_name = "NVIDIA A100-SXM4-40GB"};
  AllocatableDevice d{.name = "gpu-0-mig-1g.5gb-0",
                      .type = DeviceType::kMig,
                      .gpu = gpu,
                      .mig = MigInfo{.uuid = "MIG-1", .parent_uuid = "GPU-P", .profile = "1g.5gb"}};
  EXPECT_EQ(DeviceStatusData(d), nlohmann::json({{"uuid", "MIG-1"},
                                                 {"productName", "NVIDIA A100-SXM4-40GB"},
                                                 {"parentUUID", "GPU-P"},
                                                 {"profile", "1g.5gb"}}));
  const StatusClaimRef claim{.namespace_name = "ns", .name = "c", .uid = "u"};
  nlohmann::json body = DeviceStatusApplyBody(
      "gpu.nvidia.com", claim, {{.pool = "p", .device = "d", .share_id = "s-1", .data = {}}},
      absl::Now());
  EXPECT_EQ(body["status"]["devices"][0]["shareID"], "s-1");
  EXPECT_FALSE(body["status"]["devices"][0]["conditions"][0].contains("observedGeneration"));
  // Removal: an empty list under the same manager.
  body = DeviceStatusApplyBody("gpu.nvidia.com", claim, {}, absl::Now());
  EXPECT_EQ(body["status"], nlohmann::json({{"devices", nlohmann::json::array()}}));
}

TEST(DeviceStatusBodyTest, FieldManagerAndUndoData) {
  EXPECT_EQ(DeviceStatusFieldManager("gpu.nvidia.com", "node-1"), "gpu.nvidia.com/node-1");
  EXPECT_EQ(DeviceStatusFieldManager("gpu.nvidia.com", std::string(200, 'n')).size(), 128u);
  const StatusClaimRef claim{.namespace_name = "ns", .name = "c", .uid = "u"};
  auto back = StatusClaimRefFromJson(StatusClaimRefToJson(claim));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, claim);
  auto bad = StatusClaimRefFromJson({{"namespace", "ns"}, {"name", 5}, {"uid", "u"}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_THAT(bad.status().message(), HasSubstr("\"name\""));
}

class DeviceStatusStepTest : public DeviceStateTest {
 protected:
  void SetUp() override {
    Init("h100-8x");
    UseWriter(true);
  }
  // Reopens with the recording writer; `write`: --device-status.
  void UseWriter(bool write) {
    state_.reset();
    state_ = std::make_unique<DeviceState>(
        inventory_, cdi_.get(), checkpoint_.get(),
        DeviceState::Options{.pool_name = "node1",
                             .gates = gates_.get(),
                             .services = {.time_slicing = time_slicing_.get(),
                                          .mps = mps_.get(),
                                          .device_status = &writer_},
                             .write_device_status = write,
                             .clock = &clock_});
  }
  std::vector<std::string> StepNames(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok() && c->has_value());
    if (!c.ok() || !c->has_value()) return {};
    auto steps = prepare::StepRecordsFromJson((*c)->steps);
    EXPECT_TRUE(steps.ok()) << steps.status();
    std::vector<std::string> out;
    for (const prepare::StepRecord& r : steps.value_or(std::vector<prepare::StepRecord>{})) {
      out.push_back(r.name + ":" + prepare::StepStateName(r.state));
    }
    return out;
  }
  RecordingWriter writer_;
};

TEST_F(DeviceStatusStepTest, PrepareWritesEachDeviceAfterTheCdiSpecAndUnprepareRemoves) {
  k8s::ResourceClaim claim = Claim("uid-1", {"gpu-2", "gpu-5"});
  claim.metadata.generation = 2;
  bool spec_there_at_write = false;
  writer_.on_write = [&] { spec_there_at_write = std::filesystem::exists(SpecPath("uid-1")); };
  ASSERT_TRUE(state_->Prepare(claim).ok());
  ASSERT_EQ(writer_.writes.size(), 1u);
  const auto& [ref, entries] = writer_.writes[0];
  EXPECT_EQ(ref,
            (StatusClaimRef{
                .namespace_name = "ns", .name = "claim-uid-1", .uid = "uid-1", .generation = 2}));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].pool, "node1");
  EXPECT_EQ(entries[0].device, "gpu-2");
  EXPECT_EQ(entries[0].data["uuid"], Uuid("gpu-2"));
  EXPECT_EQ(entries[0].data["productName"], inventory_.Find("gpu-2")->gpu.product_name);
  EXPECT_FALSE(entries[0].data.contains("parentUUID"));
  EXPECT_EQ(entries[1].data["uuid"], Uuid("gpu-5"));
  EXPECT_TRUE(spec_there_at_write);
  EXPECT_THAT(StepNames("uid-1"), ElementsAre("cdiSpec:applied", "deviceStatus:applied"));

  // Prepared already: no second write.
  ASSERT_TRUE(state_->Prepare(claim).ok());
  EXPECT_EQ(writer_.writes.size(), 1u);

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ASSERT_EQ(writer_.removes.size(), 1u);
  EXPECT_EQ(writer_.removes[0].uid, "uid-1");
  EXPECT_EQ(writer_.removes[0].name, "claim-uid-1");
  EXPECT_EQ(writer_.removes[0].namespace_name, "ns");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

TEST_F(DeviceStatusStepTest, MigDeviceDataNamesParentAndProfile) {
  Init("a100-mig-4x");
  UseWriter(true);
  const AllocatableDevice* mig = nullptr;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig) {
      mig = &d;
      break;
    }
  }
  ASSERT_NE(mig, nullptr);
  ASSERT_TRUE(state_->Prepare(Claim("uid-m", {mig->name})).ok());
  ASSERT_EQ(writer_.writes.size(), 1u);
  const nlohmann::json& data = writer_.writes[0].second.at(0).data;
  EXPECT_EQ(data["uuid"], mig->mig->uuid);
  EXPECT_EQ(data["parentUUID"], mig->gpu.uuid);
  EXPECT_EQ(data["profile"], mig->mig->profile);
  EXPECT_NE(data["uuid"], data["parentUUID"]);
}

TEST_F(DeviceStatusStepTest, FailedWriteDoesNotFailThePrepareAndIsStillRemoved) {
  writer_.write_error = absl::UnavailableError("connection refused");
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-1"}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ(writer_.writes.size(), 1u);
  // The write may have reached the server before the error: recorded, so unprepare removes.
  EXPECT_THAT(StepNames("uid-1"), ElementsAre("cdiSpec:applied", "deviceStatus:applied"));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(writer_.removes.size(), 1u);
}

TEST_F(DeviceStatusStepTest, TooLittleTimeLeftSkipsTheWriteNotThePrepare) {
  const Deadline deadline(clock_.Now() + kDeviceStatusWriteTime - absl::Seconds(1), "prepare",
                          &clock_);
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-1"}), deadline);
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_TRUE(writer_.writes.empty());
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  // Enough time: written.
  const Deadline later(clock_.Now() + kDeviceStatusWriteTime + absl::Seconds(1), "prepare",
                       &clock_);
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-2"}), later).ok());
  EXPECT_EQ(writer_.writes.size(), 1u);
}

TEST_F(DeviceStatusStepTest, FailedRemovalKeepsTheClaimForTheRetryRefusedOneDoesNot) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-1"})).ok());
  writer_.remove_error = absl::UnavailableError("connection refused");
  absl::Status s = state_->Unprepare("uid-1");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("remove the claim's device status"));
  // Nothing else was undone yet (reverse order stops at the first failure).
  EXPECT_TRUE(std::filesystem::exists(SpecPath("uid-1")));
  EXPECT_THAT(StepNames("uid-1"), ElementsAre("cdiSpec:applied", "deviceStatus:applied"));
  writer_.remove_error = absl::OkStatus();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
  EXPECT_EQ(writer_.removes.size(), 2u);

  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-2"})).ok());
  writer_.remove_error = absl::PermissionDeniedError("resourceclaims/driver is forbidden");
  EXPECT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_EQ(StateOf("uid-2"), std::nullopt);
}

TEST_F(DeviceStatusStepTest, SwitchedOffWritesNothingButStillRemovesRecordedEntries) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-1"})).ok());
  UseWriter(false);
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-2"})).ok());
  EXPECT_EQ(writer_.writes.size(), 1u);
  EXPECT_THAT(StepNames("uid-2"), ElementsAre("cdiSpec:applied"));
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_TRUE(writer_.removes.empty());
  // Written before it was switched off: removed.
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ASSERT_EQ(writer_.removes.size(), 1u);
  EXPECT_EQ(writer_.removes[0].uid, "uid-1");
}

TEST_F(DeviceStatusStepTest, WithoutAWriterTheRecordedStepIsForgottenWithAWarning) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-1"})).ok());
  Reopen();  // the fixture's DeviceState: no writer
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_TRUE(writer_.removes.empty());
}

}  // namespace
}  // namespace dra::gpu
