// VFIO claims through DeviceState (vfio_claim.h): the gpu-vfio devices beside the GPUs of the
// mock NVML, their sibling rule, and prepare/unprepare against a fake host whose sysfs behaves
// like the kernel's (test/doubles/testing/fake_pci_sysfs.h), with the real checkpoint and CDI
// spec files.

#include "lib/gpuplugin/vfio/vfio_claim.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/common/atomic_file.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/gpuplugin/vfio/vfio_devices.h"
#include "lib/gpuplugin/vfio/vfio_setup.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/fake_pci_sysfs.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kRelease[] = "6.8.0-test";

struct FakePersistence final : GpuPersistence {
  absl::Status Set(const std::string& bus_id, bool enabled) const override {
    calls.push_back(absl::StrCat(bus_id, enabled ? " on" : " off"));
    return absl::OkStatus();
  }
  mutable std::vector<std::string> calls;
};

class VfioClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string driver_root = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot("t4-2x", driver_root).ok());
    auto root = driverroot::DriverRoot::Create(
        {.root = driver_root, .host_root = "/host-driver", .proc_root = driver_root + "/proc"});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
    auto nvml = nvml::Nvml::Create(driver_root);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    auto session = (*nvml)->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    auto inventory = Discover(*session, {.sysfs_root = tmp_.path() + "/sys"});
    ASSERT_TRUE(inventory.ok()) << inventory.status();
    inventory_ = *std::move(inventory);

    // The host's PCI view of the same GPUs, one IOMMU group each.
    std::vector<dra::testing::FakePciGpu> pci;
    int group = 10;
    for (const AllocatableDevice& d : inventory_.devices) {
      if (d.type == DeviceType::kGpu)
        pci.push_back({.bus_id = d.gpu.pci_bus_id, .iommu_group = group++});
    }
    ASSERT_EQ(pci.size(), 2u);
    ASSERT_TRUE(dra::testing::MakeFakePciHost(host_root_, pci, kRelease).ok());
    auto gpus = DiscoverPciGpus(host_root_, kRelease);
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    auto vfio = VfioDevices(*gpus, host_root_);
    ASSERT_TRUE(vfio.ok()) << vfio.status();
    host_ = {.host_root = host_root_,
             .sysfs = &sysfs_,
             .run = dra::testing::FakeHostCommand(host_root_),
             .persistence = &persistence_,
             .free_timeout = absl::Seconds(2),
             .sleep = [](absl::Duration) {}};
    planning_.host = &host_;
    AddVfioDevices(inventory_, *std::move(vfio), &planning_);

    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-1\n").ok());
    auto cdi = ClaimCdi::Create(root_.get(), tmp_.path() + "/cdi", inventory_.driver_version);
    ASSERT_TRUE(cdi.ok()) << cdi.status();
    cdi_ = std::move(*cdi);
    ASSERT_TRUE(api::RegisterDriverFeatureGates(gates_).ok());
    auto cp = checkpoint::Checkpoint::Open(tmp_.path() + "/plugin", tmp_.path() + "/boot_id", {});
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = std::move(*cp);
    state_ = std::make_unique<DeviceState>(
        inventory_, cdi_.get(), checkpoint_.get(),
        DeviceState::Options{.pool_name = "node1", .gates = &gates_, .vfio = &planning_});
  }

  // A claim of `devices`; with `vfio_config`, a VfioDeviceConfig for all its requests.
  k8s::ResourceClaim Claim(const std::string& uid, const std::vector<std::string>& devices,
                           bool vfio_config = true, const std::string& policy = "LegacyOnly") {
    nlohmann::json results = nlohmann::json::array();
    for (const std::string& d : devices) {
      results.push_back(
          {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", d}});
    }
    nlohmann::json config = nlohmann::json::array();
    if (vfio_config) {
      config.push_back({{"source", "FromClaim"},
                        {"requests", nlohmann::json::array()},
                        {"opaque",
                         {{"driver", "gpu.nvidia.com"},
                          {"parameters",
                           {{"apiVersion", "resource.nvidia.com/v1beta1"},
                            {"kind", "VfioDeviceConfig"},
                            {"iommu", {{"backendPolicy", policy}, {"enableAPIDevice", true}}}}}}}});
    }
    nlohmann::json j = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", "claim-" + uid}, {"namespace", "ns"}, {"uid", uid}}},
        {"spec", {{"devices", {{"requests", {{{"name", "gpu"}}}}}}}},
        {"status", {{"allocation", {{"devices", {{"results", results}, {"config", config}}}}}}}};
    auto claim = k8s::ResourceClaim::FromJson(j);
    EXPECT_TRUE(claim.ok()) << claim.status();
    return *claim;
  }
  const PciGpu& Pci(const std::string& vfio_device) { return planning_.devices.at(vfio_device); }
  std::string Driver(const std::string& vfio_device) {
    return PciDriver(host_root_, Pci(vfio_device).bus_id);
  }
  bool Recorded(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() && c->has_value();
  }
  std::string Spec(const std::string& uid) { return ReadFile(cdi_->PathFor(uid)).value_or(""); }

  dra::testing::TempDir tmp_;
  const std::string host_root_ = tmp_.path() + "/host";
  std::unique_ptr<driverroot::DriverRoot> root_;
  Inventory inventory_;
  dra::testing::FakeKernelSysfs sysfs_{tmp_.path() + "/host"};
  FakePersistence persistence_;
  VfioHost host_;
  VfioPlanning planning_;
  FeatureGates gates_;
  std::unique_ptr<ClaimCdi> cdi_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  std::unique_ptr<DeviceState> state_;
};

TEST_F(VfioClaimTest, EachGpuHasAVfioSiblingLeftOutWhileTheOtherIsHeld) {
  ASSERT_NE(inventory_.Find("gpu-vfio-0"), nullptr);
  ASSERT_NE(inventory_.Find("gpu-vfio-1"), nullptr);
  for (const char* gpu : {"gpu-0", "gpu-1"}) {
    const std::string vfio = VfioSibling(inventory_, gpu);
    ASSERT_FALSE(vfio.empty()) << gpu;
    EXPECT_EQ(VfioSibling(inventory_, vfio), gpu);
    EXPECT_EQ(inventory_.Find(vfio)->gpu.pci_bus_id, inventory_.Find(gpu)->gpu.pci_bus_id);
  }
  const std::string sibling = VfioSibling(inventory_, "gpu-0");
  Inventory published = WithoutHeldSiblings(inventory_, {"gpu-0"});
  EXPECT_EQ(published.Find(sibling), nullptr);
  EXPECT_NE(published.Find("gpu-0"), nullptr);
  EXPECT_EQ(published.devices.size(), inventory_.devices.size() - 1);
  published = WithoutHeldSiblings(inventory_, {sibling});
  EXPECT_EQ(published.Find("gpu-0"), nullptr);
  EXPECT_EQ(WithoutHeldSiblings(inventory_, {}).devices.size(), inventory_.devices.size());
}

TEST_F(VfioClaimTest, PrepareBindsToVfioAndUnprepareReturnsTheGpuToNvidia) {
  ASSERT_EQ(Driver("gpu-vfio-0"), "nvidia");
  auto prepared = state_->Prepare(Claim("uid-1", {"gpu-vfio-0"}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(Driver("gpu-vfio-0"), "vfio-pci");
  EXPECT_EQ(Driver("gpu-vfio-1"), "nvidia");
  EXPECT_TRUE(Recorded("uid-1"));
  const std::string spec = Spec("uid-1");
  EXPECT_THAT(spec, HasSubstr(absl::StrCat("\"/dev/vfio/", Pci("gpu-vfio-0").iommu_group, "\"")));
  EXPECT_THAT(spec, HasSubstr("\"/dev/vfio/vfio\""));  // enableAPIDevice, legacy backend
  EXPECT_THAT(spec, HasSubstr("NVIDIA_VISIBLE_DEVICES=void"));
  EXPECT_THAT(spec, Not(HasSubstr("libnvidia-ml")));  // no driver files
  EXPECT_THAT(spec, Not(HasSubstr("/dev/nvidia0")));
  EXPECT_THAT(persistence_.calls, ::testing::ElementsAre(Pci("gpu-vfio-0").bus_id + " off"));
  // The sibling GPU cannot be prepared for another claim meanwhile.
  auto sibling = state_->Prepare(Claim("uid-2", {VfioSibling(inventory_, "gpu-vfio-0")}, false));
  EXPECT_TRUE(absl::IsFailedPrecondition(sibling.status())) << sibling.status();
  EXPECT_THAT(sibling.status().message(), HasSubstr("is the same GPU as device gpu-vfio-0"));

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(Driver("gpu-vfio-0"), "nvidia");
  EXPECT_FALSE(Recorded("uid-1"));
  EXPECT_FALSE(fs::exists(cdi_->PathFor("uid-1")));
  EXPECT_EQ(persistence_.calls.back(), Pci("gpu-vfio-0").bus_id + " on");
  EXPECT_TRUE(state_->Unprepare("uid-1").ok());
}

// adminAccess (KEP-5018) observes devices; preparing a VFIO device would take the GPU from the
// nvidia driver under the claim that holds it.
TEST_F(VfioClaimTest, AdminAccessToAVfioDeviceIsRefusedAndBindsNothing) {
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-vfio-0"})).ok());
  for (const std::string& device : {std::string("gpu-vfio-0"), std::string("gpu-vfio-1")}) {
    SCOPED_TRACE(device);  // held by uid-1, and free
    k8s::ResourceClaim admin = Claim("admin", {device});
    admin.status.allocation->devices.results[0].admin_access = true;
    auto prepared = state_->Prepare(admin);
    ASSERT_FALSE(prepared.ok());
    EXPECT_TRUE(api::IsPermanentConfigError(prepared.status())) << prepared.status();
    EXPECT_THAT(prepared.status().message(),
                HasSubstr("adminAccess to VFIO device " + device + " is not supported"));
    EXPECT_FALSE(Recorded("admin"));
    ASSERT_TRUE(state_->Unprepare("admin").ok());
  }
  EXPECT_EQ(Driver("gpu-vfio-0"), "vfio-pci");  // uid-1's bind kept
  EXPECT_EQ(Driver("gpu-vfio-1"), "nvidia");
}

TEST_F(VfioClaimTest, BindFailureLeavesTheGpuOnNvidiaWithoutRecordAndARetryWorks) {
  sysfs_.FailWrites("drivers/vfio-pci/bind", EIO);
  auto prepared = state_->Prepare(Claim("uid-1", {"gpu-vfio-1"}));
  ASSERT_FALSE(prepared.ok());
  EXPECT_THAT(prepared.status().message(), HasSubstr("drivers/vfio-pci/bind"));
  EXPECT_EQ(Driver("gpu-vfio-1"), "nvidia");
  EXPECT_FALSE(Recorded("uid-1"));
  EXPECT_FALSE(fs::exists(cdi_->PathFor("uid-1")));
  EXPECT_EQ(persistence_.calls.back(), Pci("gpu-vfio-1").bus_id + " on");

  sysfs_.ClearFailures();
  prepared = state_->Prepare(Claim("uid-1", {"gpu-vfio-1"}));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(Driver("gpu-vfio-1"), "vfio-pci");
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(Driver("gpu-vfio-1"), "nvidia");
}

TEST_F(VfioClaimTest, IommufdPolicyUsesTheCdevReadAfterTheBindAndDevIommu) {
  planning_.iommufd_available = true;
  ASSERT_TRUE(Pci("gpu-vfio-0").iommufd_cdev.empty());  // on nvidia: no vfio-dev entry yet
  auto prepared = state_->Prepare(Claim("uid-1", {"gpu-vfio-0"}, true, "PreferIommuFD"));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  const std::string spec = Spec("uid-1");
  EXPECT_THAT(spec, HasSubstr("\"/dev/vfio/devices/vfio"));
  EXPECT_THAT(spec, HasSubstr("\"/dev/iommu\""));
  EXPECT_THAT(spec, Not(HasSubstr("\"/dev/vfio/vfio\"")));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(Driver("gpu-vfio-0"), "nvidia");
}

TEST_F(VfioClaimTest, TwoVfioConfigGroupsAreRefused) {
  k8s::ResourceClaim claim = Claim("uid-1", {"gpu-vfio-0", "gpu-vfio-1"});
  nlohmann::json j = claim.ToJson();
  nlohmann::json& config = j["status"]["allocation"]["devices"]["config"];
  config.push_back(config[0]);
  config[0]["requests"] = {"gpu"};
  config[1]["requests"] = {"other"};
  j["status"]["allocation"]["devices"]["results"][1]["request"] = "other";
  auto parsed = k8s::ResourceClaim::FromJson(j);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto prepared = state_->Prepare(*parsed);
  ASSERT_FALSE(prepared.ok());
  EXPECT_THAT(prepared.status().message(),
              HasSubstr("contains 2 VFIO device groups, but at most one is supported per claim"));
  EXPECT_EQ(Driver("gpu-vfio-0"), "nvidia");
  EXPECT_EQ(Driver("gpu-vfio-1"), "nvidia");
}

TEST_F(VfioClaimTest, WithoutAHostAVfioClaimFailsAndChangesNothing) {
  DeviceState state(inventory_, cdi_.get(), checkpoint_.get(),
                    DeviceState::Options{.pool_name = "node1", .gates = &gates_});
  auto prepared = state.Prepare(Claim("uid-1", {"gpu-vfio-0"}));
  EXPECT_TRUE(absl::IsInternal(prepared.status())) << prepared.status();
  EXPECT_EQ(Driver("gpu-vfio-0"), "nvidia");
  EXPECT_FALSE(Recorded("uid-1"));
}

TEST_F(VfioClaimTest, HeldDevicesAreReportedAfterEachCheckpointWrite) {
  std::vector<std::set<std::string>> reports;
  std::vector<std::string> on_disk;  // the checkpoint file as each report found it
  DeviceState state(
      inventory_, cdi_.get(), checkpoint_.get(),
      DeviceState::Options{.pool_name = "node1",
                           .gates = &gates_,
                           .vfio = &planning_,
                           .on_held_devices = [&](const std::set<std::string>& h) {
                             reports.push_back(h);
                             on_disk.push_back(ReadFile(checkpoint_->path()).value_or(""));
                           }});
  ASSERT_TRUE(state.Prepare(Claim("uid-1", {"gpu-vfio-1"})).ok());
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back(), std::set<std::string>{"gpu-vfio-1"});
  // What the plugin publishes meanwhile: the GPU's nvidia side is gone, the other GPU stays.
  const Inventory published = WithoutHeldSiblings(inventory_, reports.back());
  EXPECT_EQ(published.Find(VfioSibling(inventory_, "gpu-vfio-1")), nullptr);
  EXPECT_NE(published.Find("gpu-vfio-0"), nullptr);
  ASSERT_TRUE(state.Unprepare("uid-1").ok());
  EXPECT_TRUE(reports.back().empty());  // re-added
  // Each report follows a committed write: the file already records what it reports, and the
  // last one (the claim forgotten) finds the claim gone from it.
  for (size_t i = 0; i < reports.size(); ++i) {
    for (const std::string& d : reports[i]) EXPECT_THAT(on_disk[i], HasSubstr(d)) << "report " << i;
  }
  EXPECT_THAT(on_disk.back(), Not(HasSubstr("uid-1")));
}

TEST(VfioRuntime, RefusesAMissingHostRootOrIommuAndAddsTheDevices) {
  dra::testing::TempDir tmp;
  Inventory inventory;
  auto missing = VfioRuntime::Create(tmp.path() + "/nowhere", "/", inventory, kRelease);
  EXPECT_THAT(missing.status().message(), HasSubstr("host root is not mounted at"));
  fs::create_directories(tmp.path() + "/bare");
  auto no_iommu = VfioRuntime::Create(tmp.path() + "/bare", "/", inventory, kRelease);
  EXPECT_THAT(no_iommu.status().message(), HasSubstr("IOMMU is not enabled in the kernel"));
  EXPECT_TRUE(inventory.devices.empty());

  ASSERT_TRUE(dra::testing::MakeFakePciHost(
                  tmp.path() + "/host", {{.bus_id = "0000:65:00.0", .iommu_group = 3}}, kRelease)
                  .ok());
  auto runtime =
      VfioRuntime::Create(tmp.path() + "/host", "/run/nvidia/driver", inventory, kRelease);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  ASSERT_EQ(inventory.devices.size(), 1u);
  EXPECT_EQ(inventory.devices[0].name, "gpu-vfio-0");
  EXPECT_EQ((*runtime)->planning().devices.at("gpu-vfio-0").iommu_group, 3);
  auto target = VfioTargetOf(inventory, (*runtime)->planning(), "gpu-vfio-0");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->bus_id, "0000:65:00.0");
  EXPECT_EQ(target->module, "vfio_pci");
  EXPECT_EQ(target->nvidia_device, "/run/nvidia/driver/dev/nvidia-unknown");  // no NVML GPU
}

}  // namespace
}  // namespace dra::gpu
