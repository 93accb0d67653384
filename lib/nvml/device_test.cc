// The facade against the mock NVML for every shipped profile: system info, enumeration, identity,
// PCI, memory, architecture and settings; the expected values come from the profile files.

#include <strings.h>

#include <fstream>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/nvml/nvml.h"
#include "nlohmann/json.hpp"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::nvml {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct ProfileCase {
  std::string profile;
  unsigned int count;
  std::string name;
  Architecture arch;
  ComputeCapability cc;
  uint64_t memory_mib;
  bool mig_capable;
  bool mig_enabled;
  std::optional<AddressingMode> addressing;
  bool module_ids;
  bool fabric;
  bool persistence;
};

const ProfileCase kCases[] = {
    {"h100-8x",
     8,
     "NVIDIA H100 80GB HBM3",
     Architecture::kHopper,
     {9, 0},
     81559,
     true,
     false,
     AddressingMode::kHmm,
     true,
     false,
     true},
    {"a100-mig-4x",
     4,
     "NVIDIA A100-SXM4-40GB",
     Architecture::kAmpere,
     {8, 0},
     40960,
     true,
     true,
     AddressingMode::kNone,
     false,
     false,
     true},
    {"t4-2x",
     2,
     "Tesla T4",
     Architecture::kTuring,
     {7, 5},
     15360,
     false,
     false,
     std::nullopt,
     false,
     false,
     false},
    {"gb200-4x",
     4,
     "NVIDIA GB200",
     Architecture::kBlackwell,
     {10, 0},
     189471,
     true,
     false,
     AddressingMode::kAts,
     true,
     true,
     true},
};

nlohmann::json ReadProfile(const std::string& profile) {
  std::ifstream in(testing::ProfilePath(profile));
  return nlohmann::json::parse(in);
}

class NvmlDeviceTest : public ::testing::TestWithParam<ProfileCase> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MakeMockDriverRoot(GetParam().profile, dir_.path()).ok());
    auto nvml = Nvml::Create(dir_.path());
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = *std::move(nvml);
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
    auto devices = session_->Devices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = *devices;
    profile_ = ReadProfile(GetParam().profile);
  }

  testing::TempDir dir_;
  std::unique_ptr<Nvml> nvml_;
  std::optional<Session> session_;
  std::vector<Device> devices_;
  nlohmann::json profile_;
};

TEST_P(NvmlDeviceTest, SystemVersions) {
  EXPECT_EQ(*session_->DriverVersion(), "580.126.20");
  EXPECT_EQ(*session_->CudaDriverVersion(), 13000);
}

TEST_P(NvmlDeviceTest, CountNamesAndUuids) {
  ASSERT_EQ(devices_.size(), GetParam().count);
  std::set<std::string> uuids;
  for (size_t i = 0; i < devices_.size(); ++i) {
    EXPECT_EQ(*devices_[i].Name(), GetParam().name);
    const std::string uuid = *devices_[i].Uuid();
    EXPECT_THAT(uuid, StartsWith("GPU-"));
    EXPECT_EQ(uuid, profile_["gpus"][i]["uuid"].get<std::string>());
    uuids.insert(uuid);
    EXPECT_EQ(*devices_[i].Index(), i);
    EXPECT_EQ(*devices_[i].MinorNumber(), i);
  }
  EXPECT_EQ(uuids.size(), devices_.size());
}

TEST_P(NvmlDeviceTest, LookupByUuidAndPciBusId) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    const std::string uuid = *devices_[i].Uuid();
    absl::StatusOr<Device> by_uuid = session_->DeviceByUuid(uuid);
    ASSERT_TRUE(by_uuid.ok()) << by_uuid.status();
    EXPECT_EQ(*by_uuid, devices_[i]);
    const std::string bus_id = profile_["gpus"][i]["pci_bus_id"].get<std::string>();
    absl::StatusOr<Device> by_pci = session_->DeviceByPciBusId(bus_id);
    ASSERT_TRUE(by_pci.ok()) << by_pci.status();
    EXPECT_EQ(*by_pci, devices_[i]);
  }
  absl::StatusOr<Device> missing =
      session_->DeviceByUuid("GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_TRUE(IsNvmlError(missing.status(), ReturnCode::kNotFound));
  EXPECT_EQ(missing.status().message(), "nvmlDeviceGetHandleByUUID: not found");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(IsNvmlError(session_->DeviceByIndex(99).status(), ReturnCode::kInvalidArgument));
}

TEST_P(NvmlDeviceTest, PciInfo) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    absl::StatusOr<PciInfo> pci = devices_[i].Pci();
    ASSERT_TRUE(pci.ok()) << pci.status();
    const std::string want = profile_["gpus"][i]["pci_bus_id"].get<std::string>();  // 0000:18:00.0
    EXPECT_EQ(pci->bus_id.size(), 16u) << pci->bus_id;  // 00000000:18:00.0
    EXPECT_TRUE(strcasecmp(pci->bus_id_legacy.c_str(), want.c_str()) == 0) << pci->bus_id_legacy;
    EXPECT_TRUE(strcasecmp(pci->bus_id.c_str() + 4, want.c_str()) == 0) << pci->bus_id;
    EXPECT_EQ(pci->pci_device_id & 0xffff, 0x10deu);
  }
}

TEST_P(NvmlDeviceTest, MemoryArchitectureBrandComputeCapability) {
  for (const Device& gpu : devices_) {
    absl::StatusOr<MemoryInfo> memory = gpu.Memory();
    ASSERT_TRUE(memory.ok()) << memory.status();
    EXPECT_EQ(memory->total, GetParam().memory_mib << 20);
    EXPECT_GT(memory->reserved, 0u);
    EXPECT_EQ(memory->total, memory->used + memory->free);
    EXPECT_EQ(*gpu.Architecture(), GetParam().arch);
    EXPECT_EQ(*gpu.Brand(), Brand::kNvidia);
    const ComputeCapability cc = *gpu.CudaComputeCapability();
    EXPECT_EQ(cc.major, GetParam().cc.major);
    EXPECT_EQ(cc.minor, GetParam().cc.minor);
    EXPECT_EQ(*gpu.VirtualizationMode(), VirtualizationMode::kNone);
  }
}

TEST_P(NvmlDeviceTest, OptionalAttributes) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& gpu = devices_[i];
    absl::StatusOr<AddressingMode> mode = gpu.AddressingMode();
    if (GetParam().addressing) {
      ASSERT_TRUE(mode.ok()) << mode.status();
      EXPECT_EQ(*mode, *GetParam().addressing);
    } else {
      EXPECT_TRUE(IsNotSupported(mode.status())) << mode.status();
    }
    absl::StatusOr<unsigned int> module = gpu.ModuleId();
    if (GetParam().module_ids) {
      EXPECT_EQ(*module, i + 1);
    } else {
      EXPECT_TRUE(IsNotSupported(module.status()));
    }
  }
}

TEST_P(NvmlDeviceTest, FabricInfo) {
  for (const Device& gpu : devices_) {
    absl::StatusOr<FabricInfo> fabric = gpu.Fabric();
    if (!GetParam().fabric) {
      EXPECT_TRUE(IsNotSupported(fabric.status())) << fabric.status();
      EXPECT_EQ(fabric.status().message(), "nvmlDeviceGetGpuFabricInfoV: not supported");
      continue;
    }
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    EXPECT_EQ(fabric->state, FabricState::kCompleted);
    EXPECT_EQ(fabric->status, 0);
    EXPECT_EQ(fabric->clique_id, 7u);
    EXPECT_FALSE(fabric->ClusterUuidIsZero());
    EXPECT_EQ(fabric->ClusterUuidString(),
              profile_["gpu_defaults"]["fabric"]["cluster_uuid"].get<std::string>());
  }
}

TEST_P(NvmlDeviceTest, MigCapability) {
  for (const Device& gpu : devices_) {
    absl::StatusOr<MigModeInfo> mode = gpu.MigMode();
    if (!GetParam().mig_capable) {
      EXPECT_TRUE(IsNotSupported(mode.status())) << mode.status();
      continue;
    }
    ASSERT_TRUE(mode.ok()) << mode.status();
    EXPECT_EQ(mode->current_enabled, GetParam().mig_enabled);
    EXPECT_EQ(mode->pending_enabled, GetParam().mig_enabled);
  }
}

TEST_P(NvmlDeviceTest, SettingsPersistAcrossSessions) {
  const Device& gpu = devices_.back();
  EXPECT_EQ(*gpu.PersistenceMode(), GetParam().persistence);
  EXPECT_EQ(*gpu.ComputeMode(), ComputeMode::kDefault);
  ASSERT_TRUE(gpu.SetPersistenceMode(!GetParam().persistence).ok());
  ASSERT_TRUE(gpu.SetComputeMode(ComputeMode::kExclusiveProcess).ok());
  absl::Status bad = gpu.SetComputeMode(ComputeMode::kExclusiveThread);
  EXPECT_TRUE(IsNotSupported(bad)) << bad;

  // After the last session closed, a new Nvml on the same root (the same loaded library,
  // re-initialized) reads the change back from the state file.
  ASSERT_TRUE(session_->Close().ok());
  auto again = Nvml::Create(dir_.path());
  ASSERT_TRUE(again.ok()) << again.status();
  auto session = (*again)->Open();
  ASSERT_TRUE(session.ok()) << session.status();
  Device same = *session->DeviceByIndex(GetParam().count - 1);
  EXPECT_EQ(*same.PersistenceMode(), !GetParam().persistence);
  EXPECT_EQ(*same.ComputeMode(), ComputeMode::kExclusiveProcess);
}

INSTANTIATE_TEST_SUITE_P(Profiles, NvmlDeviceTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ProfileCase>& info) {
                           std::string name = info.param.profile;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace dra::nvml
