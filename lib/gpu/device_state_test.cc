// Prepare/unprepare against a mock driver root: inventory from the mock NVML, a real checkpoint
// and real CDI spec files in a temp dir.

#include "lib/gpu/device_state.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/common/atomic_file.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;

class DeviceStateTest : public ::testing::Test {
 protected:
  void Init(const std::string& profile) {
    root_path_ = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot(profile, root_path_).ok());
    auto root = driverroot::DriverRoot::Create(
        {.root = root_path_, .host_root = "/host-driver", .proc_root = root_path_ + "/proc"});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
    auto nvml = nvml::Nvml::Create(root_path_);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = std::move(*nvml);
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    auto inventory = Discover(*session, {.sysfs_root = tmp_.path() + "/sys"});
    ASSERT_TRUE(inventory.ok()) << inventory.status();
    inventory_ = *inventory;
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-1\n").ok());
    auto cdi = ClaimCdi::Create(root_.get(), tmp_.path() + "/cdi", inventory_.driver_version);
    ASSERT_TRUE(cdi.ok()) << cdi.status();
    cdi_ = std::move(*cdi);
    ASSERT_TRUE(api::RegisterDriverFeatureGates(gates_).ok());
    Reopen();
  }
  // A fresh checkpoint handle and DeviceState over the same files, as after a plugin restart.
  void Reopen() {
    state_.reset();
    auto cp = checkpoint::Checkpoint::Open(tmp_.path() + "/plugin", tmp_.path() + "/boot_id");
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = std::move(*cp);
    state_ =
        std::make_unique<DeviceState>(inventory_, cdi_.get(), checkpoint_.get(),
                                      DeviceState::Options{.pool_name = "node1", .gates = &gates_});
  }
  k8s::ResourceClaim Claim(const std::string& uid, const std::vector<std::string>& devices,
                           nlohmann::json config = nlohmann::json::array()) {
    nlohmann::json results = nlohmann::json::array();
    for (const std::string& d : devices) {
      results.push_back(
          {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", d}});
    }
    nlohmann::json j = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", "claim-" + uid}, {"namespace", "ns"}, {"uid", uid}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}},
        {"status", {{"allocation", {{"devices", {{"results", results}, {"config", config}}}}}}}};
    auto claim = k8s::ResourceClaim::FromJson(j);
    EXPECT_TRUE(claim.ok()) << claim.status();
    return *claim;
  }
  std::string SpecPath(const std::string& uid) { return cdi_->PathFor(uid); }

  dra::testing::TempDir tmp_;
  std::string root_path_;
  std::unique_ptr<driverroot::DriverRoot> root_;
  std::unique_ptr<nvml::Nvml> nvml_;
  Inventory inventory_;
  FeatureGates gates_;
  std::unique_ptr<ClaimCdi> cdi_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  std::unique_ptr<DeviceState> state_;
};

TEST_F(DeviceStateTest, PrepareWritesCdiSpecAndCheckpointIdempotently) {
  Init("h100-8x");
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-3"}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].device, "gpu-3");
  EXPECT_THAT((*devices)[0].cdi_device_ids,
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
