// Fabric Manager partitions through DeviceState (fabric_step.h): the mock NVML's h100-8x GPUs
// (module IDs 1..8) with the fake libnvfm.so.1 (test/doubles/fake-nvfm) installed in the same
// driver root and loaded through the product's loader, the real checkpoint and CDI spec files.
// FM's state lives in the driver root, so a "restarted plugin" (a new DeviceState and a reopened
// library) sees what an earlier one activated.

#include "lib/gpuplugin/fabric/fabric_step.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/consumable_shares.h"
#include "lib/api/driver_gates.h"
#include "lib/common/atomic_file.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Partition 0: all 8; 1, 2: halves; 3..6: pairs; 7..14: single GPUs.
constexpr char kPartitions[] = R"({"partitions": [
  {"id": 0, "gpus": [1, 2, 3, 4, 5, 6, 7, 8]},
  {"id": 1, "gpus": [1, 2, 3, 4]}, {"id": 2, "gpus": [5, 6, 7, 8]},
  {"id": 3, "gpus": [1, 2]}, {"id": 4, "gpus": [3, 4]}, {"id": 5, "gpus": [5, 6]},
  {"id": 6, "gpus": [7, 8]},
  {"id": 7, "gpus": [1]}, {"id": 8, "gpus": [2]}, {"id": 9, "gpus": [3]}, {"id": 10, "gpus": [4]},
  {"id": 11, "gpus": [5]}, {"id": 12, "gpus": [6]}, {"id": 13, "gpus": [7]}, {"id": 14, "gpus": [8]}
]})";

// Does what the library does, then dies like a killed plugin (in a death test's child).
class DyingAfterActivate final : public fm::FabricManager {
 public:
  explicit DyingAfterActivate(const fm::FabricManager* real) : real_(real) {}
  absl::StatusOr<std::vector<fm::Partition>> Partitions() const override {
    return real_->Partitions();
  }
  absl::Status Activate(fm::abi::PartitionId id) const override {
    absl::Status s = real_->Activate(id);
    ::_exit(s.ok() ? 7 : 8);
  }
  absl::Status Deactivate(fm::abi::PartitionId id) const override { return real_->Deactivate(id); }

 private:
  const fm::FabricManager* real_;
};

class FabricPartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", root_).ok());
    ASSERT_TRUE(dra::testing::InstallFakeFabricManager(root_, kPartitions).ok());
    auto root = driverroot::DriverRoot::Create(
        {.root = root_, .host_root = "/host-driver", .proc_root = root_ + "/proc"});
    ASSERT_TRUE(root.ok()) << root.status();
    driver_root_ = std::move(*root);
    auto nvml = nvml::Nvml::Create(root_);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    auto session = (*nvml)->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    auto inventory = Discover(*session, {.sysfs_root = tmp_.path() + "/sys", .module_ids = true});
    ASSERT_TRUE(inventory.ok()) << inventory.status();
    inventory_ = *std::move(inventory);
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-1\n").ok());
    auto cdi =
        ClaimCdi::Create(driver_root_.get(), tmp_.path() + "/cdi", inventory_.driver_version);
    ASSERT_TRUE(cdi.ok()) << cdi.status();
    cdi_ = std::move(*cdi);
    ASSERT_TRUE(api::RegisterDriverFeatureGates(gates_).ok());
    ASSERT_TRUE(gates_.Set("FabricManagerPartitioning=true").ok());
    Restart();
  }

  // A new FM library, partition list, checkpoint handle and DeviceState over the same files.
  void Restart(const fm::FabricManager* manager = nullptr) {
    state_.reset();
    fabric_.reset();
    fm_.reset();
    auto fm = fm::NvfmLibrary::Open(root_, {.address = "/run/fm.sock"});
    ASSERT_TRUE(fm.ok()) << fm.status();
    fm_ = std::move(*fm);
    auto fabric = LoadFabricPartitioning(manager != nullptr ? manager : fm_.get(), inventory_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = std::make_unique<FabricPartitioning>(*std::move(fabric));
    auto cp = checkpoint::Checkpoint::Open(tmp_.path() + "/plugin", tmp_.path() + "/boot_id", {});
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = std::move(*cp);
    state_ =
        std::make_unique<DeviceState>(inventory_, cdi_.get(), checkpoint_.get(),
                                      DeviceState::Options{.pool_name = "node1",
                                                           .gates = &gates_,
                                                           .consumable_shares = shares_,
                                                           .services = {.fabric = fabric_.get()}});
  }

  k8s::ResourceClaim Claim(const std::string& uid, const std::vector<std::string>& devices) {
    nlohmann::json results = nlohmann::json::array();
    for (const std::string& d : devices) {
      results.push_back(
          {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", d}});
    }
    nlohmann::json j = {{"apiVersion", "resource.k8s.io/v1"},
                        {"kind", "ResourceClaim"},
                        {"metadata", {{"name", "claim-" + uid}, {"namespace", "ns"}, {"uid", uid}}},
                        {"spec", {{"devices", {{"requests", {{{"name", "gpu"}}}}}}}},
                        {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
    auto claim = k8s::ResourceClaim::FromJson(j);
    EXPECT_TRUE(claim.ok()) << claim.status();
    return *claim;
  }

  // The IDs of the active partitions, as FM (the fake's state file) says.
  std::vector<unsigned int> Active() {
    std::vector<unsigned int> out;
    auto parts = fm_->Partitions();
    EXPECT_TRUE(parts.ok()) << parts.status();
    for (const fm::Partition& p : parts.value_or(std::vector<fm::Partition>{})) {
      if (p.active) out.push_back(p.id);
    }
    return out;
  }
  int Count(const std::string& what) {
    std::ifstream in(root_ + "/var/lib/mock-nvfm/calls.log");
    int n = 0;
    for (std::string line; std::getline(in, line);) n += absl::StartsWith(line, what) ? 1 : 0;
    return n;
  }
  std::optional<checkpoint::PreparedClaim> Record(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : std::nullopt;
  }
  void Inject(const std::string& call, int code, int times) {
    const std::string path = root_ + "/var/lib/mock-nvfm/inject.json";
    EXPECT_TRUE(
        WriteFileAtomically(path, nlohmann::json{{call, {{"code", code}, {"times", times}}}}.dump())
            .ok());
  }

  dra::testing::TempDir tmp_;
  std::string root_;
  std::unique_ptr<driverroot::DriverRoot> driver_root_;
  Inventory inventory_;
  std::unique_ptr<ClaimCdi> cdi_;
  FeatureGates gates_;
  api::ConsumableShares shares_;
  std::unique_ptr<fm::NvfmLibrary> fm_;
  std::unique_ptr<FabricPartitioning> fabric_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  std::unique_ptr<DeviceState> state_;
};

TEST_F(FabricPartitionTest, ModuleIdsAndPartitionAttributesArePublished) {
  ASSERT_EQ(fabric_->module_by_bus_id.size(), 8u);
  AddFabricAttributes(inventory_, *fabric_);
  const auto& a = inventory_.Find("gpu-0")->published.attributes;
  EXPECT_EQ(a.at("gpuModuleID").int_value, 1);
  EXPECT_EQ(a.at("partition8").int_value, 0);
  EXPECT_EQ(a.at("partition4").int_value, 1);
  EXPECT_EQ(a.at("partition2").int_value, 3);
  EXPECT_EQ(a.at("partition1").int_value, 7);
  const auto& b = inventory_.Find("gpu-7")->published.attributes;
  EXPECT_EQ(b.at("gpuModuleID").int_value, 8);
  EXPECT_EQ(b.at("partition4").int_value, 2);
  EXPECT_EQ(b.at("partition2").int_value, 6);
  EXPECT_TRUE(CheckDeviceLimits(inventory_.Find("gpu-7")->published).ok());
}

TEST_F(FabricPartitionTest, PrepareActivatesTheExactPartitionAndUnprepareDeactivatesIt) {
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(Active(), (std::vector<unsigned int>{3}));
  EXPECT_TRUE(std::filesystem::exists(cdi_->PathFor("uid-1")));
  auto record = Record("uid-1");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->state, checkpoint::ClaimState::kPrepareCompleted);
  ASSERT_TRUE(record->steps.is_array());
  EXPECT_EQ(record->steps[0]["name"], "fabricPartition");  // first, before the device steps
  EXPECT_EQ(record->steps[0]["undo"]["partition"], 3);
  EXPECT_EQ(record->steps[0]["undo"]["modules"], nlohmann::json({1, 2}));
  EXPECT_EQ(record->steps[0]["undo"]["gpus"], nlohmann::json({"0000:18:00.0", "0000:2a:00.0"}));
  // The other half of the node is independent.
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-4", "gpu-5", "gpu-6", "gpu-7"})).ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{2, 3}));

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{2}));
  EXPECT_FALSE(Record("uid-1"));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());  // idempotent
  EXPECT_EQ(Count("fmDeactivateFabricPartition 3"), 1);
}

TEST_F(FabricPartitionTest, NoMatchingPartitionFailsWithNothingChanged) {
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-2", "gpu-1"}));
  ASSERT_FALSE(devices.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(devices.status())) << devices.status();
  EXPECT_THAT(devices.status().message(),
              HasSubstr("fabric manager: GPU module set [1 2 3] does not match any FM partition; "
                        "refusing partition activation"));
  EXPECT_TRUE(Active().empty());
  EXPECT_EQ(Count("fmActivateFabricPartition"), 0);
  EXPECT_FALSE(Record("uid-1"));
  EXPECT_FALSE(std::filesystem::exists(cdi_->PathFor("uid-1")));
}

// The fabric check comes after the configs and the device plan and before the checks against
// other claims: a claim whose GPUs match no partition and overlap another claim's reports the
// partition, with nothing changed.
TEST_F(FabricPartitionTest, NoMatchingPartitionIsReportedBeforeAnOverlap) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"})).ok());
  auto devices = state_->Prepare(Claim("uid-2", {"gpu-0", "gpu-2", "gpu-1"}));
  ASSERT_FALSE(devices.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(devices.status())) << devices.status();
  EXPECT_THAT(devices.status().message(),
              HasSubstr("fabric manager: GPU module set [1 2 3] does not match any FM partition; "
                        "refusing partition activation"));
  EXPECT_THAT(devices.status().message(), Not(HasSubstr("uid-1")));
  EXPECT_EQ(Active(), (std::vector<unsigned int>{3}));
  EXPECT_EQ(Count("fmActivateFabricPartition"), 1);  // uid-1's
  EXPECT_FALSE(Record("uid-2"));
  // Without the fabric mismatch the same overlap is what fails.
  auto overlap = state_->Prepare(Claim("uid-3", {"gpu-0", "gpu-1"}));
  ASSERT_FALSE(overlap.ok());
  EXPECT_THAT(overlap.status().message(), Not(HasSubstr("fabric manager")));
  EXPECT_THAT(overlap.status().message(), HasSubstr("uid-1"));
}

TEST_F(FabricPartitionTest, RetriedPrepareIsIdempotentAndAnActivePartitionIsKept) {
  ASSERT_TRUE(fm_->Activate(4).ok());  // GPUs 3, 4: active before the claim (FM's own reasons)
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-3"})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-3"})).ok());
  Restart();
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-3"})).ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{4}));
  EXPECT_EQ(Count("fmActivateFabricPartition"), 1);  // the test's own
}

TEST_F(FabricPartitionTest, FailedActivationFailsThePrepareAndTheRetrySucceeds) {
  Inject("fmActivateFabricPartition", -10, 1);  // FM_ST_NVLINK_ERROR once
  auto first = state_->Prepare(Claim("uid-1", {"gpu-0"}));
  ASSERT_FALSE(first.ok());
  EXPECT_THAT(first.status().message(),
              HasSubstr("fabric manager: activate partition 7 (GPU modules 1)"));
  EXPECT_THAT(first.status().message(), HasSubstr("FM_ST_NVLINK_ERROR"));
  EXPECT_FALSE(Record("uid-1"));  // the failed step changed nothing; its record is gone
  EXPECT_FALSE(std::filesystem::exists(cdi_->PathFor("uid-1")));
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{7}));
}

TEST_F(FabricPartitionTest, ALaterFailingStepDeactivatesThePartition) {
  // Gate DeviceMetadata without metadata files: the deviceMetadata step (after fabricPartition,
  // not resumable) fails, and the engine undoes fabricPartition.
  ASSERT_TRUE(gates_.Set("PassthroughSupport=true,DeviceMetadata=true").ok());
  Restart();
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"}));
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.status().message(), Not(HasSubstr("fabric manager")));
  EXPECT_EQ(Count("fmActivateFabricPartition 3"), 1);
  EXPECT_EQ(Count("fmDeactivateFabricPartition 3"), 1);
  EXPECT_TRUE(Active().empty());
  EXPECT_FALSE(Record("uid-1"));
}

TEST_F(FabricPartitionTest, SharedGpusKeepThePartitionUntilTheLastClaimGoes) {
  ASSERT_TRUE(gates_.Set("ConsumableShares=true").ok());
  auto shares = api::ParseConsumableShares("unlimited", gates_);
  ASSERT_TRUE(shares.ok()) << shares.status();
  shares_ = *shares;
  Restart();
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-0", "gpu-1"})).ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{3}));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{3}));  // uid-2 still uses GPUs 1 and 2
  EXPECT_EQ(Count("fmDeactivateFabricPartition"), 0);
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_TRUE(Active().empty());
}

// adminAccess (KEP-5018): a monitoring claim over every GPU, some in another claim's active
// partition, activates and deactivates no partition.
TEST_F(FabricPartitionTest, AdminClaimActivatesAndDeactivatesNoPartition) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"})).ok());
  ASSERT_EQ(Active(), (std::vector<unsigned int>{3}));
  k8s::ResourceClaim admin =
      Claim("admin", {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"});
  for (auto& r : admin.status.allocation->devices.results) r.admin_access = true;
  auto devices = state_->Prepare(admin);
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(Active(), (std::vector<unsigned int>{3}));
  EXPECT_EQ(Count("fmActivateFabricPartition"), 1);  // uid-1's
  ASSERT_TRUE(state_->Unprepare("admin").ok());
  EXPECT_EQ(Active(), (std::vector<unsigned int>{3}));
  EXPECT_EQ(Count("fmDeactivateFabricPartition"), 0);
}

TEST_F(FabricPartitionTest, KilledAfterActivationTheRecordFinishesOrUndoesIt) {
  for (const bool retry : {true, false}) {
    SCOPED_TRACE(retry ? "retried prepare" : "unprepare");
    const std::string uid = retry ? "uid-retry" : "uid-unprepare";
    auto library = fm::NvfmLibrary::Open(root_, {.address = "/run/fm.sock"});
    ASSERT_TRUE(library.ok()) << library.status();
    DyingAfterActivate dying(library->get());
    Restart(&dying);
    EXPECT_EXIT((void)state_->Prepare(Claim(uid, {"gpu-4", "gpu-5"})), ::testing::ExitedWithCode(7),
                "");
    Restart();  // the plugin's restart: a new library, the same driver root and checkpoint
    EXPECT_EQ(Active(), (std::vector<unsigned int>{5}));
    auto record = Record(uid);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->state, checkpoint::ClaimState::kPrepareStarted);
    EXPECT_EQ(record->steps[0]["name"], "fabricPartition");
    EXPECT_EQ(record->steps[0]["state"], "begun");
    if (retry) {
      ASSERT_TRUE(state_->Prepare(Claim(uid, {"gpu-4", "gpu-5"})).ok());
      EXPECT_EQ(Record(uid)->state, checkpoint::ClaimState::kPrepareCompleted);
      EXPECT_EQ(Active(), (std::vector<unsigned int>{5}));
    }
    ASSERT_TRUE(state_->Unprepare(uid).ok());
    EXPECT_TRUE(Active().empty());
    EXPECT_FALSE(Record(uid));
  }
}

TEST_F(FabricPartitionTest, UnprepareFromARecordNeedsTheFabricManager) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-6", "gpu-7"})).ok());
  // Restarted with the gate off: the record still names the partition.
  state_ = std::make_unique<DeviceState>(inventory_, cdi_.get(), checkpoint_.get(),
                                         DeviceState::Options{.pool_name = "node1"});
  absl::Status s = state_->Unprepare("uid-1");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("fabric partition 6 needs to be deactivated"));
  EXPECT_TRUE(Record("uid-1"));  // kept for the retry
  Restart();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_TRUE(Active().empty());
}

TEST(FabricTargetTest, UnknownModuleIdNamesTheDevice) {
  FabricPartitioning fabric{.partitions = {{.id = 1, .module_ids = {1}}},
                            .module_by_bus_id = {{"0000:18:00.0", 1}}};
  RecordedDevice gpu{
      .kubelet = {.device_name = "gpu-0"}, .type = DeviceType::kGpu, .pci_bus_id = "0000:18:00.0"};
  RecordedDevice vfio{.kubelet = {.device_name = "gpu-vfio-1"},
                      .type = DeviceType::kVfio,
                      .pci_bus_id = "0000:2a:00.0"};
  RecordedDevice mig{.kubelet = {.device_name = "gpu-0-mig-1g10gb-19-0"},
                     .type = DeviceType::kMig,
                     .pci_bus_id = "0000:2a:00.0"};
  auto t = FabricTargetOf(fabric, {gpu, mig});  // MIG devices do not count
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->has_value());
  EXPECT_EQ(**t, (FabricTarget{.partition = 1, .modules = {1}, .gpus = {"0000:18:00.0"}}));
  auto none = FabricTargetOf(fabric, {mig});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // A VFIO device counts by the GPU behind it (its PCI bus id).
  FabricPartitioning with_vfio = fabric;
  with_vfio.partitions.push_back({.id = 2, .module_ids = {2, 1}});
  with_vfio.module_by_bus_id["0000:2a:00.0"] = 2;
  auto both = FabricTargetOf(with_vfio, {vfio, gpu});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(
      **both,
      (FabricTarget{.partition = 2, .modules = {1, 2}, .gpus = {"0000:18:00.0", "0000:2a:00.0"}}));
  auto unknown = FabricTargetOf(fabric, {gpu, vfio});
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("GPU module ID of device gpu-vfio-1 (PCI bus id 0000:2a:00.0) is unknown"));
}

}  // namespace
}  // namespace dra::gpu
