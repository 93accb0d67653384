// MIG through the facade against the mock: profiles, placements, pre-created MIG devices,
// create/destroy rules, MIG mode changes, and persistence seen by another session, a forked
// process and a separate program (the fake nvidia-smi).

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/mock-nvml/caps_minors.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::nvml {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class NvmlMigTest : public ::testing::Test {
 protected:
  void Load(const std::string& profile) {
    ASSERT_TRUE(testing::MakeMockDriverRoot(profile, dir_.path()).ok());
    auto nvml = Nvml::Create(dir_.path());
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = *std::move(nvml);
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
  }

  Device Gpu(unsigned int index) { return *session_->DeviceByIndex(index); }

  std::string ReadFile(const std::string& relative) {
    std::ifstream in(dir_.path() + relative);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  testing::TempDir dir_;
  std::unique_ptr<Nvml> nvml_;
  std::optional<Session> session_;
};

TEST_F(NvmlMigTest, A100Profiles) {
  Load("a100-mig-4x");
  absl::StatusOr<std::vector<GpuInstanceProfile>> profiles = Gpu(0).GpuInstanceProfiles();
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  std::vector<uint32_t> ids;
  for (const GpuInstanceProfile& p : *profiles) ids.push_back(p.id);
  EXPECT_THAT(ids, ElementsAre(19, 14, 9, 5, 0, 20, 15));  // in profile index order
  const GpuInstanceProfile& one = (*profiles)[0];
  EXPECT_EQ(one.index, 0u);
  EXPECT_EQ(one.name, "MIG 1g.5gb");
  EXPECT_EQ(one.slice_count, 1u);
  EXPECT_EQ(one.instance_count, 7u);
  EXPECT_EQ(one.multiprocessor_count, 14u);
  EXPECT_EQ(one.memory_size_mb, 4864u);
  // Unsupported and out-of-range indexes, as the profile scan skips them.
  EXPECT_TRUE(IsNvmlError(Gpu(0).GpuInstanceProfileInfo(5).status(), ReturnCode::kNotSupported));
  EXPECT_TRUE(
      IsNvmlError(Gpu(0).GpuInstanceProfileInfo(40).status(), ReturnCode::kInvalidArgument));

  absl::StatusOr<std::vector<Placement>> placements = Gpu(0).GpuInstancePossiblePlacements(9);
  ASSERT_TRUE(placements.ok()) << placements.status();
  EXPECT_THAT(*placements, ElementsAre(Placement{0, 4}, Placement{4, 4}));
  EXPECT_EQ(Gpu(0).GpuInstancePossiblePlacements(19)->size(), 7u);
}

TEST_F(NvmlMigTest, A100PreCreatedMigDevices) {
  Load("a100-mig-4x");
  Device gpu = Gpu(0);
  EXPECT_EQ(*gpu.MaxMigDeviceCount(), 7u);
  absl::StatusOr<std::vector<MigDevice>> migs = gpu.MigDevices();
  ASSERT_TRUE(migs.ok()) << migs.status();
  ASSERT_EQ(migs->size(), 4u);
  std::vector<std::string> names;
  for (const MigDevice& mig : *migs) {
    names.push_back(*mig.Name());
    EXPECT_THAT(*mig.Uuid(), StartsWith("MIG-"));
    EXPECT_EQ(*mig.Parent(), gpu);
    absl::StatusOr<MigDevice> by_uuid = session_->MigDeviceByUuid(*mig.Uuid());
    ASSERT_TRUE(by_uuid.ok()) << by_uuid.status();
    EXPECT_EQ(*by_uuid->GpuInstanceId(), *mig.GpuInstanceId());
  }
  EXPECT_THAT(
      names, ElementsAre("NVIDIA A100-SXM4-40GB MIG 1g.5gb", "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
                         "NVIDIA A100-SXM4-40GB MIG 2g.10gb", "NVIDIA A100-SXM4-40GB MIG 3g.20gb"));
  const MigDevice& small = (*migs)[0];
  EXPECT_EQ(small.Memory()->total, 4864ull << 20);
  const MigDeviceAttributes attributes = *small.Attributes();
  EXPECT_EQ(attributes.multiprocessor_count, 14u);
  EXPECT_EQ(attributes.gpu_instance_slice_count, 1u);
  EXPECT_EQ(attributes.memory_size_mb, 4864u);

  // A GPU with MIG on and nothing created (strands, docs/compatibility.md "Devices"), and lookups
  // that fail.
  EXPECT_TRUE(Gpu(3).MigDevices()->empty());
  EXPECT_TRUE(IsNvmlError(gpu.GpuInstanceById(9).status(), ReturnCode::kNotFound));
  EXPECT_TRUE(
      IsNvmlError(session_->MigDeviceByUuid(*gpu.Uuid()).status(), ReturnCode::kInvalidArgument));
  EXPECT_TRUE(
      IsNvmlError(session_->DeviceByUuid(*small.Uuid()).status(), ReturnCode::kInvalidArgument));
}

TEST_F(NvmlMigTest, A100GpuInstancesAndComputeInstances) {
  Load("a100-mig-4x");
  absl::StatusOr<std::vector<GpuInstance>> gis = Gpu(0).AllGpuInstances();
  ASSERT_TRUE(gis.ok()) << gis.status();
  ASSERT_EQ(gis->size(), 4u);
  const GpuInstanceInfo info = *(*gis)[3].Info();
  EXPECT_EQ(info.profile_id, 9u);
  EXPECT_EQ(info.placement, (Placement{4, 4}));
  absl::StatusOr<std::vector<ComputeInstanceProfile>> ci_profiles =
      (*gis)[3].ComputeInstanceProfiles();
  ASSERT_TRUE(ci_profiles.ok()) << ci_profiles.status();
  ASSERT_EQ(ci_profiles->size(), 3u);  // 1c, 2c, 3c of a 3g instance
  EXPECT_EQ((*ci_profiles)[0].name, "MIG 1c.3g.20gb");
  EXPECT_EQ((*ci_profiles)[2].name, "MIG 3g.20gb");
  absl::StatusOr<std::vector<ComputeInstance>> cis = (*gis)[3].ComputeInstances((*ci_profiles)[2]);
  ASSERT_TRUE(cis.ok()) << cis.status();
  ASSERT_EQ(cis->size(), 1u);
  EXPECT_EQ((*cis)[0].Info()->placement, (Placement{0, 3}));
  EXPECT_THAT(*(*cis)[0].AsMigDevice()->Uuid(), StartsWith("MIG-"));
}

TEST_F(NvmlMigTest, CreateDestroyIsPersistedAndSeenElsewhere) {
  Load("a100-mig-4x");
  Device gpu = Gpu(2);  // one 3g.20gb at placement 4; slices 0-3 free
  EXPECT_EQ(*gpu.GpuInstanceRemainingCapacity(9), 1u);
  absl::StatusOr<GpuInstance> gi = gpu.CreateGpuInstance(9, Placement{0, 4});
  ASSERT_TRUE(gi.ok()) << gi.status();
  absl::StatusOr<GpuInstance> again = gpu.CreateGpuInstance(9, Placement{0, 4});
  EXPECT_TRUE(IsNvmlError(again.status(), ReturnCode::kInsufficientResources)) << again.status();
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(IsNvmlError(gpu.CreateGpuInstance(19).status(), ReturnCode::kInsufficientResources));

  const GpuInstanceInfo gi_info = *gi->Info();
  absl::StatusOr<ComputeInstance> ci = gi->CreateComputeInstance(2);  // the full 3c profile
  ASSERT_TRUE(ci.ok()) << ci.status();
  const std::string mig_uuid = *ci->AsMigDevice()->Uuid();
  EXPECT_EQ(gpu.MigDevices()->size(), 2u);

  // The kernel-side files follow.
  const std::string caps =
      "/proc/driver/nvidia/capabilities/gpu2/mig/gi" + std::to_string(gi_info.id);
  const unsigned int gi_minor = mock_nvml::GiAccessMinor(2, gi_info.id);
  EXPECT_EQ(ReadFile(caps + "/access"), "DeviceFileMinor: " + std::to_string(gi_minor) +
                                            "\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  EXPECT_THAT(ReadFile(caps + "/ci0/access"),
              StartsWith("DeviceFileMinor: " + std::to_string(gi_minor + 1) + "\n"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/dev/nvidia-caps/nvidia-cap" +
                                      std::to_string(gi_minor)));

  // A second session of a fresh library load sees the new MIG device.
  {
    auto other = Nvml::Create(dir_.path());
    ASSERT_TRUE(other.ok());
    auto session = (*other)->Open();
    ASSERT_TRUE(session.ok());
    absl::StatusOr<MigDevice> mig = session->MigDeviceByUuid(mig_uuid);
    ASSERT_TRUE(mig.ok()) << mig.status();
    EXPECT_EQ(*mig->Name(), "NVIDIA A100-SXM4-40GB MIG 3g.20gb");
  }
  // So does a separate program.
  absl::StatusOr<testing::CommandResult> smi =
      testing::RunCommand({dir_.path() + "/usr/bin/nvidia-smi", "-L"});
  ASSERT_TRUE(smi.ok());
  EXPECT_THAT(smi->output, HasSubstr(mig_uuid));

  // Destroy: the GPU instance is in use until its compute instance is gone.
  absl::Status busy = gi->Destroy();
  EXPECT_TRUE(IsNvmlError(busy, ReturnCode::kInUse)) << busy;
  EXPECT_EQ(busy.message(), "nvmlGpuInstanceDestroy: in use by another client");
  ASSERT_TRUE(ci->Destroy().ok());
  ASSERT_TRUE(gi->Destroy().ok());
  EXPECT_TRUE(IsNvmlError(gi->Info().status(), ReturnCode::kInvalidArgument));  // stale handle
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + caps));
  smi = testing::RunCommand({dir_.path() + "/usr/bin/nvidia-smi", "-L"});
  ASSERT_TRUE(smi.ok());
  EXPECT_THAT(smi->output, ::testing::Not(HasSubstr(mig_uuid)));
}

TEST_F(NvmlMigTest, ChangesFromAForkedProcessAreSeen) {
  Load("a100-mig-4x");
  ASSERT_EQ(Gpu(3).MigDevices()->size(), 0u);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: create a 7g.40gb instance with its compute instance on GPU 3, then exit.
    auto nvml = Nvml::Create(dir_.path());
    if (!nvml.ok()) ::_exit(2);
    auto session = (*nvml)->Open();
    if (!session.ok()) ::_exit(3);
    auto gi = session->DeviceByIndex(3)->CreateGpuInstance(0);
    if (!gi.ok()) ::_exit(4);
    ::_exit(gi->CreateComputeInstance(4).ok() ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  absl::StatusOr<std::vector<MigDevice>> migs = Gpu(3).MigDevices();
  ASSERT_TRUE(migs.ok()) << migs.status();
  ASSERT_EQ(migs->size(), 1u);
  EXPECT_EQ(*(*migs)[0].Name(), "NVIDIA A100-SXM4-40GB MIG 7g.40gb");
  EXPECT_EQ(*(*migs)[0].GpuInstanceId(), 0u);  // a full-GPU instance gets id 0
}

TEST_F(NvmlMigTest, RecreatedInstanceGetsANewUuid) {
  Load("a100-mig-4x");
  Device gpu = Gpu(3);
  auto first = gpu.CreateGpuInstance(19, Placement{0, 1});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string uuid = *first->CreateComputeInstance(0)->AsMigDevice()->Uuid();
  ASSERT_TRUE(first->ComputeInstanceById(0)->Destroy().ok());
  ASSERT_TRUE(first->Destroy().ok());
  auto second = gpu.CreateGpuInstance(19, Placement{0, 1});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->Info()->id, 1u);  // the freed id is reused
  EXPECT_NE(*second->CreateComputeInstance(0)->AsMigDevice()->Uuid(), uuid);
}

TEST_F(NvmlMigTest, AmpereMigModeChangeNeedsAReset) {
  Load("a100-mig-4x");
  absl::Status in_use = Gpu(0).SetMigMode(false).status();
  EXPECT_TRUE(IsNvmlError(in_use, ReturnCode::kInUse)) << in_use;
  absl::StatusOr<ReturnCode> activation = Gpu(3).SetMigMode(false);
  ASSERT_TRUE(activation.ok()) << activation.status();
  EXPECT_EQ(*activation, ReturnCode::kResetRequired);
  const MigModeInfo mode = *Gpu(3).MigMode();
  EXPECT_TRUE(mode.current_enabled);
  EXPECT_FALSE(mode.pending_enabled);
}

TEST_F(NvmlMigTest, HopperTogglesMigWithoutReset) {
  Load("h100-8x");
  Device gpu = Gpu(5);
  EXPECT_FALSE(gpu.MigMode()->current_enabled);
  // Profiles are visible with MIG off; instances are not (NOT_SUPPORTED, docs/compatibility.md
  // "Devices").
  EXPECT_EQ(gpu.GpuInstanceProfiles()->size(), 7u);
  EXPECT_EQ(gpu.GpuInstanceProfileInfo(0)->name, "MIG 1g.10gb");
  EXPECT_TRUE(IsNvmlError(gpu.GpuInstanceById(1).status(), ReturnCode::kNotSupported));
  EXPECT_TRUE(IsNvmlError(gpu.CreateGpuInstance(19).status(), ReturnCode::kNotSupported));
  EXPECT_EQ(*gpu.MaxMigDeviceCount(), 0u);

  EXPECT_EQ(*gpu.SetMigMode(true), ReturnCode::kSuccess);
  EXPECT_TRUE(gpu.MigMode()->current_enabled);
  auto gi = gpu.CreateGpuInstance(19, Placement{6, 1});
  ASSERT_TRUE(gi.ok()) << gi.status();
  ASSERT_TRUE(gi->CreateComputeInstance(0).ok());
  EXPECT_EQ(*gpu.MigDevices()->at(0).Name(), "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
  EXPECT_TRUE(
      IsNvmlError(gi->CreateComputeInstance(0).status(), ReturnCode::kInsufficientResources));
  EXPECT_TRUE(IsNvmlError(gpu.CreateGpuInstance(19, Placement{7, 1}).status(),
                          ReturnCode::kInvalidArgument));  // not a possible placement
}

TEST_F(NvmlMigTest, NoMigOnT4) {
  Load("t4-2x");
  Device gpu = Gpu(0);
  EXPECT_TRUE(IsNotSupported(gpu.MigMode().status()));
  EXPECT_TRUE(IsNotSupported(gpu.GpuInstanceProfileInfo(0).status()));
  EXPECT_TRUE(IsNotSupported(gpu.SetMigMode(true).status()));
  EXPECT_TRUE(IsNotSupported(gpu.MigDevices().status()));
}

}  // namespace
}  // namespace dra::nvml
