// A node switched from the public Go driver: its checkpoint is adopted (go_prepared.h), the
// adopted claims stay prepared, and unpreparing them removes the Go driver's CDI spec and undoes
// their time-slice and MPS daemon as for claims this plugin prepared.

#include <fstream>

#include "lib/checkpoint/go_test_files.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

namespace go = checkpoint::testing_go;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GoAdoptionTest : public DeviceStateTest {
 protected:
  void WriteGoCheckpoint(const std::vector<std::string>& v2_claims,
                         const std::vector<std::string>& v1_claims = {}) {
    std::filesystem::create_directories(tmp_.path() + "/plugin");
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/plugin/checkpoint.json",
                                    go::File(go::V2Section("boot-1", v2_claims),
                                             v1_claims.empty() ? "" : go::V1Section(v1_claims)))
                    .ok());
  }
  // The Go driver's spec file of a claim: YAML, same base name as ours.
  std::string GoSpecPath(const std::string& uid) {
    return tmp_.path() + "/cdi/k8s.gpu.nvidia.com-claim_" + uid + ".yaml";
  }
  void WriteGoSpec(const std::string& uid, const std::string& device) {
    std::ofstream(GoSpecPath(uid)) << "cdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\n"
                                   << "devices:\n- name: " << uid << "-" << device << "\n";
  }
  std::vector<RecordedDevice> Recorded(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok() && c->has_value());
    if (!c.ok() || !c->has_value()) return {};
    auto devices = PreparedDevicesFromJson((*c)->prepared_devices);
    EXPECT_TRUE(devices.ok()) << devices.status();
    return devices.value_or(std::vector<RecordedDevice>{});
  }
};

TEST_F(GoAdoptionTest, TimeSlicedGpuClaimIsAdoptedAndUnpreparedLikeOurOwn) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  SetGpu("gpu-2", "DEFAULT", 3);  // what the Go driver's prepare left: interval Long
  const std::string group = go::Group({go::GpuDevice(Uuid("gpu-2"), go::Dev("uid-go", "gpu-2"))},
                                      R"({"timeSliceApplied":true})");
  WriteGoCheckpoint({go::ClaimV2("uid-go", "PrepareCompleted", go::Status({"gpu-2"}), {group})},
                    {go::ClaimV1("uid-go", go::Status({"gpu-2"}), {group})});
  WriteGoSpec("uid-go", "gpu-2");
  Reopen();

  ASSERT_TRUE(checkpoint_->open_adoption().has_value());
  EXPECT_EQ(checkpoint_->open_adoption()->claims, 1u);
  EXPECT_FALSE(checkpoint_->open_corruption().has_value());
  EXPECT_EQ(StateOf("uid-go"), checkpoint::ClaimState::kPrepareCompleted);
  std::vector<RecordedDevice> recorded = Recorded("uid-go");
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].type, DeviceType::kGpu);
  EXPECT_EQ(recorded[0].uuid, Uuid("gpu-2"));
  EXPECT_EQ(recorded[0].minor, inventory_.Find("gpu-2")->gpu.minor);
  EXPECT_EQ(recorded[0].pci_bus_id, inventory_.Find("gpu-2")->gpu.pci_bus_id);
  EXPECT_THAT(recorded[0].kubelet.request_names, ElementsAre("gpu"));
  EXPECT_THAT(recorded[0].kubelet.cdi_device_ids,
              ElementsAre("k8s.gpu.nvidia.com/claim=uid-go-gpu-2"));
  EXPECT_EQ(recorded[0].time_slice_applied, true);

  // The kubelet may prepare it again (a plugin restart): the recorded devices, nothing rewritten.
  auto again = state_->Prepare(Claim("uid-go", {"gpu-2"}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, recorded);
  EXPECT_TRUE(std::filesystem::exists(GoSpecPath("uid-go")));
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");
  // Its device is held.
  auto other = state_->Prepare(Claim("uid-2", {"gpu-2"}));
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("requested device gpu-2 is already allocated to different claim uid-go"));

  ASSERT_TRUE(state_->Unprepare("uid-go").ok());
  EXPECT_FALSE(std::filesystem::exists(GoSpecPath("uid-go")));
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Default");
  EXPECT_FALSE(StateOf("uid-go").has_value());
}

TEST_F(GoAdoptionTest, StaticMigDeviceKeepsItsIdentity) {
  Init("a100-mig-4x");
  const AllocatableDevice* mig = nullptr;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig) {
      mig = &d;
      break;
    }
  }
  ASSERT_NE(mig, nullptr);
  const std::string group = go::Group({go::MigDevice(
      mig->mig->parent_minor, mig->mig->gi_id, mig->mig->ci_id, mig->mig->uuid,
      mig->mig->parent_uuid, mig->mig->parent_pci_bus_id, go::Dev("uid-mig", mig->name))});
  WriteGoCheckpoint({go::ClaimV2("uid-mig", "PrepareCompleted", go::Status({mig->name}), {group})});
  WriteGoSpec("uid-mig", mig->name);
  Reopen();

  std::vector<RecordedDevice> recorded = Recorded("uid-mig");
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].type, DeviceType::kMig);
  EXPECT_EQ(recorded[0].kubelet.device_name, mig->name);
  EXPECT_EQ(recorded[0].uuid, mig->mig->uuid);
  EXPECT_EQ(recorded[0].minor, mig->gpu.minor);
  ASSERT_TRUE(recorded[0].mig.has_value());
  EXPECT_EQ(*recorded[0].mig, *mig->mig);  // profile and placement from the inventory
  EXPECT_FALSE(recorded[0].time_slice_applied.has_value());

  ASSERT_TRUE(state_->Unprepare("uid-mig").ok());
  EXPECT_FALSE(std::filesystem::exists(GoSpecPath("uid-mig")));
}

TEST_F(GoAdoptionTest, MpsDaemonOfAnAdoptedClaimIsStoppedAtUnprepare) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string group =
      go::Group({go::GpuDevice(Uuid("gpu-1"), go::Dev("uid-mps", "gpu-1")),
                 go::GpuDevice(Uuid("gpu-4"), go::Dev("uid-mps", "gpu-4"))},
                R"({"mpsControlDaemonID":"uid-mps-0a1b2","mpsApplied":true})");
  WriteGoCheckpoint(
      {go::ClaimV2("uid-mps", "PrepareCompleted", go::Status({"gpu-1", "gpu-4"}), {group})});
  WriteGoSpec("uid-mps", "gpu-1");
  Reopen();

  std::vector<RecordedDevice> recorded = Recorded("uid-mps");
  ASSERT_EQ(recorded.size(), 2u);
  for (const RecordedDevice& d : recorded) {
    ASSERT_TRUE(d.mps_daemon.has_value()) << d.kubelet.device_name;
    EXPECT_EQ(d.mps_daemon->id, "uid-mps-0a1b2");
    EXPECT_EQ(d.mps_daemon->ns, "mps-ns");
    EXPECT_THAT(d.mps_daemon->full_gpu_uuids, ElementsAre(Uuid("gpu-1"), Uuid("gpu-4")));
  }
  ASSERT_TRUE(state_->Unprepare("uid-mps").ok());
  EXPECT_THAT(mps_->calls, ElementsAre("stop uid-mps-0a1b2"));
  EXPECT_FALSE(std::filesystem::exists(GoSpecPath("uid-mps")));
}

TEST_F(GoAdoptionTest, PrepareStartedClaimIsAdoptedWithItsNameAndPreparedAgain) {
  Init("h100-8x");
  WriteGoCheckpoint({go::StartedClaimV2("uid-s", "ns", "claim-uid-s")});
  Reopen();
  auto c = checkpoint_->Get("uid-s");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->state, checkpoint::ClaimState::kPrepareStarted);
  EXPECT_EQ((*c)->namespace_name, "ns");
  EXPECT_EQ((*c)->name, "claim-uid-s");
  // The kubelet's retry completes it.
  auto devices = state_->Prepare(Claim("uid-s", {"gpu-1"}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(StateOf("uid-s"), checkpoint::ClaimState::kPrepareCompleted);
}

TEST_F(GoAdoptionTest, ConversionFallsBackToTheNameAndReadsAdminAccess) {
  Init("h100-8x");
  const nlohmann::json groups = nlohmann::json::parse(
      go::List({go::Group({go::GpuDevice("GPU-gone", go::Dev("u", "gpu-17"))}),
                go::Group({go::MigDevice(5, 3, 0, "MIG-x", "GPU-y", "0000:05:00.0",
                                         go::Dev("u", "gpu-5-mig-1g10gb-me-19-6"))})},
               false));
  const nlohmann::json allocation = {
      {"devices",
       {{"results",
         {{{"request", "gpu"}, {"pool", "node1"}, {"device", "gpu-17"}, {"adminAccess", true}}}}}}};
  auto devices = PreparedDevicesFromGo(groups, allocation, inventory_, "ns");
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].minor, 17u);
  EXPECT_TRUE((*devices)[0].admin_access);
  EXPECT_FALSE((*devices)[1].admin_access);
  ASSERT_TRUE((*devices)[1].mig.has_value());
  EXPECT_EQ((*devices)[1].mig->profile, "1g10gb-me");
  EXPECT_EQ((*devices)[1].mig->gi_profile_id, 19u);
  EXPECT_EQ((*devices)[1].mig->placement_start, 6u);
  EXPECT_EQ((*devices)[1].mig->gi_id, 3u);
  EXPECT_EQ((*devices)[1].minor, 5u);

  auto bad =
      PreparedDevicesFromGo(nlohmann::json::parse(R"([{"devices":[{"gpu":null,"mig":null}]}])"),
                            nullptr, inventory_, "ns");
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("preparedDevices[0].devices[0]: neither a gpu, a mig nor a vfio device"));
}

}  // namespace
}  // namespace dra::gpu
