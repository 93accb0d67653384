// After a corrupt checkpoint, or a switch from the Go driver, the CDI specs of claims still in use
// on this node must survive the cleanup, and their records come back (rebuild.h).

#include "lib/gpuplugin/prepare/rebuild.h"

#include <fstream>

#include "lib/checkpoint/go_test_files.h"
#include "lib/gpuplugin/prepare/cleanup.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

namespace go = checkpoint::testing_go;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Answers as the API server would for the claims in `in_use` (allocated here, reserved).
class FakeClaimApi final : public ClaimApi {
 public:
  absl::StatusOr<nlohmann::json> Get(const std::string& ns, const std::string& name) override {
    if (raw_get.has_value()) return *raw_get;
    for (const k8s::ResourceClaim& c : in_use) {
      if (c.metadata.namespace_name == ns && c.metadata.name == name) return c.ToJson();
    }
    return absl::NotFoundError(absl::StrCat("resourceclaims \"", name, "\" not found"));
  }
  absl::StatusOr<std::vector<k8s::ResourceClaim>> ListInUseOnNode() override {
    ++lists;
    if (!list_status.ok()) return list_status;
    return in_use;
  }
  std::vector<k8s::ResourceClaim> in_use;
  std::optional<nlohmann::json> raw_get;  // set: what every Get answers, as the server sent it
  absl::Status list_status;
  int lists = 0;
};

class RebuildTest : public DeviceStateTest {
 protected:
  void Start(const std::string& profile, const std::string& gates = "") {
    Init(profile);
    if (!gates.empty()) Configure(gates);
    MakeDriver();
  }
  // A driver and cleanup over the current state (again after each Reopen).
  void MakeDriver() {
    cleanup_.reset();
    driver_ = std::make_unique<GpuDriver>(state_.get(), tmp_.path() + "/plugin", &metrics_);
    cleanup_ = std::make_unique<Cleanup>(&api_, checkpoint_.get(), cdi_.get(), state_.get(),
                                         driver_.get());
  }
  void CorruptCheckpoint() {
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/plugin/checkpoint.json", "{\"trunc").ok());
    Reopen();
    ASSERT_TRUE(checkpoint_->open_corruption().has_value());
    MakeDriver();
  }
  bool HasSpec(const std::string& uid) { return std::filesystem::exists(SpecPath(uid)); }

  metrics::Registry registry_;
  DriverMetrics metrics_{&registry_, kDriverName, "node1"};
  FakeClaimApi api_;
  std::unique_ptr<GpuDriver> driver_;
  std::unique_ptr<Cleanup> cleanup_;
};

TEST_F(RebuildTest, CorruptCheckpointIsRebuiltFromCdiSpecsAndTheApiServer) {
  Start("h100-8x", "TimeSlicingSettings=true");
  const k8s::ResourceClaim sliced = Claim("uid-1", {"gpu-2"}, TimeSliced("Long"));
  const k8s::ResourceClaim plain = Claim("uid-2", {"gpu-3"});
  ASSERT_TRUE(state_->Prepare(sliced).ok());
  ASSERT_TRUE(state_->Prepare(plain).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-3", {"gpu-4"})).ok());
  const auto before = checkpoint_->Get("uid-1");
  ASSERT_EQ(GpuSetting("gpu-2"), "Default/Long");
  CorruptCheckpoint();
  api_.in_use = {sliced, plain};  // uid-3's pod is gone

  auto result = ReconcileCdiSpecs(api_, *cdi_, *checkpoint_, *state_, *driver_,
                                  /*remove_orphans=*/false);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->rebuilt, ElementsAre("uid-1", "uid-2"));
  EXPECT_THAT(result->orphans, ElementsAre("uid-3"));
  EXPECT_THAT(result->removed, IsEmpty());
  EXPECT_EQ(result->Summary(false),
            "rebuilt 2 prepared claims from CDI specs and the API server; 1 CDI spec without a "
            "claim in use on this node left for the cleanup");
  EXPECT_TRUE(HasSpec("uid-1") && HasSpec("uid-2") && HasSpec("uid-3"));
  // The rebuilt record is the one prepare wrote.
  const auto rebuilt = checkpoint_->Get("uid-1");
  ASSERT_TRUE(rebuilt.ok() && rebuilt->has_value());
  EXPECT_EQ(**rebuilt, **before);
  EXPECT_EQ(state_->PreparedDeviceCounts()["gpu"], 2);

  // The cleanup removes the orphan and keeps the specs of claims in use.
  ASSERT_TRUE(cleanup_->RunOnce().ok());
  EXPECT_FALSE(HasSpec("uid-3"));
  EXPECT_TRUE(HasSpec("uid-1") && HasSpec("uid-2"));
  // Unprepare of a rebuilt claim undoes its time-slice, as before the corruption.
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Default");
  EXPECT_FALSE(HasSpec("uid-1"));
}

// After a reboot (a new boot ID; a CDI directory that is not tmpfs keeps its specs) the
// checkpoint's records are dropped, and neither the start-up rebuild nor the cleanup's first pass
// (which runs right after start-up) may bring them back from the specs written before the boot:
// the kubelet's prepare after the reboot must apply again what the reboot reset (here the
// time-slice). It found the rebuilt record PrepareCompleted and applied nothing before.
TEST_F(RebuildTest, AfterARebootNothingIsRebuiltFromSpecsWrittenBeforeIt) {
  Start("h100-8x", "TimeSlicingSettings=true");
  const k8s::ResourceClaim sliced = Claim("uid-1", {"gpu-2"}, TimeSliced("Long"));
  ASSERT_TRUE(state_->Prepare(sliced).ok());
  ASSERT_EQ(GpuSetting("gpu-2"), "Default/Long");
  ASSERT_TRUE(HasSpec("uid-1"));

  // The reboot: the GPU's settings are reset, the boot ID is new, the CDI specs are kept; the
  // claim is still allocated and in use here (its pod comes back).
  SetGpu("gpu-2", "DEFAULT", 0);
  ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-2\n").ok());
  Reopen();
  MakeDriver();
  ASSERT_EQ(checkpoint_->claims_invalidated_by_reboot(), 1u);
  api_.in_use = {sliced};
  auto startup = ReconcileCdiSpecs(api_, *cdi_, *checkpoint_, *state_, *driver_,
                                   /*remove_orphans=*/false);
  ASSERT_TRUE(startup.ok()) << startup.status();
  EXPECT_THAT(startup->rebuilt, IsEmpty());
  ASSERT_TRUE(cleanup_->RunOnce().ok());
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  // Removed with the records (not left for the prepare to rewrite: see rebuild.h).
  EXPECT_FALSE(HasSpec("uid-1"));

  // The kubelet prepares the claim again: the time-slice is set again and the spec written.
  ASSERT_TRUE(state_->Prepare(sliced).ok());
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");
  EXPECT_TRUE(HasSpec("uid-1"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
}

TEST_F(RebuildTest, NoSpecIsRemovedWhileTheApiServerCannotSay) {
  Start("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  CorruptCheckpoint();
  api_.list_status = absl::PermissionDeniedError("resourceclaims is forbidden");

  auto result = ReconcileCdiSpecs(api_, *cdi_, *checkpoint_, *state_, *driver_, false);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->Summary(false),
              HasSubstr("could not ask the API server which claims are in use here (resourceclaims "
                        "is forbidden): rebuilt nothing and kept all 1 CDI spec"));
  absl::Status pass = cleanup_->RunOnce();
  EXPECT_THAT(std::string(pass.message()), HasSubstr("resourceclaims is forbidden"));
  EXPECT_TRUE(HasSpec("uid-1"));

  // Once the API server answers, the next pass rebuilds.
  api_.list_status = absl::OkStatus();
  api_.in_use = {Claim("uid-1", {"gpu-0"})};
  ASSERT_TRUE(cleanup_->RunOnce().ok());
  EXPECT_TRUE(HasSpec("uid-1"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
}

TEST_F(RebuildTest, CleanupDoesNotAskTheApiServerWithoutSpecsToDecide) {
  Start("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  api_.in_use = {Claim("uid-1", {"gpu-0"})};
  ASSERT_TRUE(cleanup_->RunOnce().ok());
  EXPECT_EQ(api_.lists, 0);
  EXPECT_TRUE(HasSpec("uid-1"));
}

// Switching from the Go driver: the cleanup must keep the Go driver's spec of an adopted claim
// (before adoption, the Go checkpoint read as corrupt and the cleanup deleted every such spec).
TEST_F(RebuildTest, CleanupKeepsTheGoDriverSpecsOfAdoptedClaims) {
  Start("h100-8x");
  std::filesystem::create_directories(tmp_.path() + "/plugin");
  const std::string group =
      go::Group({go::GpuDevice(Uuid("gpu-2"), go::Dev("uid-go", "gpu-2"))}, "{}");
  ASSERT_TRUE(WriteFileAtomically(
                  tmp_.path() + "/plugin/checkpoint.json",
                  go::File(go::V2Section("boot-1", {go::ClaimV2("uid-go", "PrepareCompleted",
                                                                go::Status({"gpu-2"}), {group})}),
                           go::V1Section({go::ClaimV1("uid-go", go::Status({"gpu-2"}), {group})})))
                  .ok());
  const std::string go_spec = tmp_.path() + "/cdi/k8s.gpu.nvidia.com-claim_uid-go.yaml";
  const std::string orphan_spec = tmp_.path() + "/cdi/k8s.gpu.nvidia.com-claim_uid-gone.yaml";
  std::ofstream(go_spec) << "kind: k8s.gpu.nvidia.com/claim\n";
  std::ofstream(orphan_spec) << "kind: k8s.gpu.nvidia.com/claim\n";
  Reopen();
  MakeDriver();
  ASSERT_TRUE(checkpoint_->open_adoption().has_value());

  ASSERT_TRUE(cleanup_->RunOnce().ok());
  EXPECT_TRUE(std::filesystem::exists(go_spec));
  EXPECT_FALSE(std::filesystem::exists(orphan_spec));  // no record, no claim in use
  EXPECT_EQ(StateOf("uid-go"), checkpoint::ClaimState::kPrepareCompleted);
}

// A ResourceClaim the API server sends malformed says nothing about the claim: the cleanup keeps
// it, says why, and goes on. Crashed before (an uncaught nlohmann::json::type_error from
// (*current)["metadata"].value("uid", "") on the cleanup thread).
TEST_F(RebuildTest, CleanupKeepsAClaimWhoseResourceClaimIsMalformed) {
  Start("h100-8x");
  const k8s::ResourceClaim claim = Claim("uid-1", {"gpu-2"});
  ASSERT_TRUE(state_->Prepare(claim).ok());
  api_.in_use = {claim};
  const std::string where = absl::StrCat("cleanup: ResourceClaim ", claim.metadata.namespace_name,
                                         "/", claim.metadata.name, " from the API server: ");
  for (const auto& [body, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"metadata":5})", "metadata: expected object, got integer"},
           {R"({"metadata":{"uid":7}})", "metadata.uid: expected string, got integer"},
           {R"({"metadata":{}})", "metadata.uid: required field is missing"},
           {R"([])", "expected object, got array"}}) {
    api_.raw_get = nlohmann::json::parse(body);
    absl::Status s = cleanup_->RunOnce();
    EXPECT_EQ(s.message(), where + want) << body;
    EXPECT_TRUE(HasSpec("uid-1")) << body;
    auto record = checkpoint_->Get("uid-1");
    ASSERT_TRUE(record.ok() && record->has_value()) << body;
  }
  api_.raw_get.reset();
  EXPECT_TRUE(cleanup_->RunOnce().ok());
  EXPECT_TRUE(HasSpec("uid-1"));
}

}  // namespace
}  // namespace dra::gpu
