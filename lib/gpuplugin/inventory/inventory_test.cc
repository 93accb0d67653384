// Discover against the mock NVML for every shipped node profile (exact device names, exact
// attribute and capacity maps of one device of each kind), plus the helpers and error paths.

#include "lib/gpuplugin/inventory/inventory.h"

#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"
#include "lib/nvml/nvml.h"
#include "nlohmann/json.hpp"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using StringMap = std::map<std::string, std::string>;

// ---- Rendering published devices as "<type>:<value>" maps, so tables state types too ----

std::string Render(const k8s::DeviceAttribute& a) {
  EXPECT_EQ(a.ValueCount(), 1);
  if (a.int_value) return "int:" + std::to_string(*a.int_value);
  if (a.bool_value) return *a.bool_value ? "bool:true" : "bool:false";
  if (a.string_value) return "string:" + *a.string_value;
  if (a.version_value) return "version:" + *a.version_value;
  if (!a.int_values.empty()) return "ints:" + absl::StrJoin(a.int_values, ",");
  if (!a.string_values.empty()) return "strings:" + absl::StrJoin(a.string_values, ",");
  if (!a.version_values.empty()) return "versions:" + absl::StrJoin(a.version_values, ",");
  return "bools:" + std::to_string(a.bool_values.size());
}

StringMap Attributes(const k8s::Device& d) {
  StringMap out;
  for (const auto& [key, value] : d.attributes) out[key] = Render(value);
  return out;
}

StringMap Capacity(const k8s::Device& d) {
  StringMap out;
  for (const auto& [key, value] : d.capacity) out[key] = value.value.ToString();
  return out;
}

std::vector<std::string> Names(const Inventory& inventory) {
  std::vector<std::string> names;
  for (const AllocatableDevice& d : inventory.devices) names.push_back(d.name);
  return names;
}

// ---- Fake sysfs ----

struct PciEntry {
  std::string bdf;
  std::string link;  // relative target of bus/pci/devices/<bdf>
  std::string numa;  // numa_node content
};

void MakeSysfs(const std::string& root, const std::vector<PciEntry>& entries) {
  for (const PciEntry& e : entries) {
    const fs::path link = fs::path(root) / "bus/pci/devices" / e.bdf;
    fs::create_directories(link.parent_path());
    fs::create_directories(link.parent_path() / e.link);
    fs::create_symlink(e.link, link);
    std::ofstream(link.parent_path() / e.link / "numa_node") << e.numa << "\n";
  }
}

std::string Under(const std::string& path) { return "../../../devices/" + path; }

// ---- Tables ----

struct ExpectedDevice {
  std::string name;
  StringMap attributes;  // a MIG device's "uuid" is looked up through NVML (mig_at)
  StringMap capacity;
  std::optional<std::pair<unsigned int, unsigned int>> mig_at;  // parent index, placement start
};

struct ProfileCase {
  std::string profile;
  std::vector<PciEntry> sysfs;
  std::vector<std::string> names;
  std::vector<ExpectedDevice> devices;
};

constexpr char kPci[] = "resource.kubernetes.io/pciBusID";
constexpr char kRoot[] = "resource.kubernetes.io/pcieRoot";
constexpr char kNuma[] = "resource.kubernetes.io/numaNode";

const ProfileCase& H100() {
  static const ProfileCase kCase{
      "h100-8x",
      {{"0000:18:00.0", Under("pci0000:15/0000:15:01.0/0000:18:00.0"), "0"},
       {"0000:2a:00.0", Under("pci0000:26/0000:26:01.0/0000:2a:00.0"), "0"},
       {"0000:3a:00.0", Under("pci0000:37/0000:37:01.0/0000:3a:00.0"), "0"},
       {"0000:5d:00.0", Under("pci0000:59/0000:59:01.0/0000:5d:00.0"), "0"},
       {"0000:9a:00.0", Under("pci0000:97/0000:97:01.0/0000:9a:00.0"), "1"},
       {"0000:ab:00.0", Under("pci0000:a8/0000:a8:01.0/0000:ab:00.0"), "1"},
       {"0000:ba:00.0", Under("pci0000:b7/0000:b7:01.0/0000:ba:00.0"), "1"},
       {"0000:db:00.0", Under("pci0000:d7/0000:d7:01.0/0000:db:00.0"), "1"}},
      {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"},
      {{"gpu-5",
        {{"type", "string:gpu"},
         {"uuid", "string:GPU-898e6bfa-0e99-4e1b-a2d2-41aeeb84195f"},
         {"productName", "string:NVIDIA H100 80GB HBM3"},
         {"brand", "string:Nvidia"},
         {"architecture", "string:Hopper"},
         {"cudaComputeCapability", "version:9.0.0"},
         {"driverVersion", "version:580.126.20"},
         {"cudaDriverVersion", "version:13.0.0"},
         {kPci, "string:0000:ab:00.0"},
         {kRoot, "string:pci0000:a8"},
         {kNuma, "int:1"},
         {"addressingMode", "string:HMM"}},
        {{"memory", "81559Mi"}},
        std::nullopt}}};
  return kCase;
}

StringMap A100MigAttributes(const std::string& parent_uuid, const std::string& profile,
                            const std::string& bdf, const std::string& root,
                            const std::string& numa) {
  return {{"type", "string:mig"},
          {"parentUUID", "string:" + parent_uuid},
          {"profile", "string:" + profile},
          {"productName", "string:NVIDIA A100-SXM4-40GB"},
          {"brand", "string:Nvidia"},
          {"architecture", "string:Ampere"},
          {"cudaComputeCapability", "version:8.0.0"},
          {"driverVersion", "version:580.126.20"},
          {"cudaDriverVersion", "version:13.0.0"},
          {kPci, "string:" + bdf},
          {kRoot, "string:" + root},
          {kNuma, "int:" + numa},
          {"addressingMode", "string:None"}};
}

const ProfileCase& A100Mig() {
  static const ProfileCase kCase{
      "a100-mig-4x",
      {{"0000:07:00.0", Under("pci0000:00/0000:00:01.1/0000:03:00.0/0000:07:00.0"), "0"},
       {"0000:0f:00.0", Under("pci0000:00/0000:00:01.2/0000:0b:00.0/0000:0f:00.0"), "0"},
       {"0000:47:00.0", Under("pci0000:40/0000:40:01.1/0000:43:00.0/0000:47:00.0"), "1"},
       {"0000:4e:00.0", Under("pci0000:40/0000:40:01.2/0000:4b:00.0/0000:4e:00.0"), "1"}},
      // GPU 3 has MIG enabled and no MIG devices: it contributes nothing (and a warning).
      {"gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g5gb-19-1", "gpu-0-mig-2g10gb-14-2",
       "gpu-0-mig-3g20gb-9-4", "gpu-1-mig-1g5gb-19-0", "gpu-1-mig-1g5gb-19-1",
       "gpu-1-mig-2g10gb-14-2", "gpu-1-mig-3g20gb-9-4", "gpu-2-mig-3g20gb-9-4"},
      {{"gpu-0-mig-1g5gb-19-0",
        A100MigAttributes("GPU-ddf71127-f4eb-4aa7-a105-64fce9969b05", "1g.5gb", "0000:07:00.0",
                          "pci0000:00", "0"),
        {{"multiprocessors", "14"},
         {"copyEngines", "1"},
         {"decoders", "0"},
         {"encoders", "0"},
         {"jpegEngines", "0"},
         {"ofaEngines", "0"},
         {"memory", "4864Mi"},
         {"memorySlice0", "1"}},
        std::make_pair(0u, 0u)},
       {"gpu-2-mig-3g20gb-9-4",
        A100MigAttributes("GPU-6cdebb4e-da07-4497-8efb-a2ff86aa0709", "3g.20gb", "0000:47:00.0",
                          "pci0000:40", "1"),
        {{"multiprocessors", "42"},
         {"copyEngines", "3"},
         {"decoders", "2"},
         {"encoders", "0"},
         {"jpegEngines", "0"},
         {"ofaEngines", "0"},
         {"memory", "19968Mi"},
         {"memorySlice4", "1"},
         {"memorySlice5", "1"},
         {"memorySlice6", "1"},
         {"memorySlice7", "1"}},
        std::make_pair(2u, 4u)}}};
  return kCase;
}

const ProfileCase& T4() {
  static const ProfileCase kCase{
      "t4-2x",
      // A cloud VM: no NUMA affinity (-1), so no numaNode; no addressing mode either.
      {{"0000:00:04.0", Under("pci0000:00/0000:00:04.0"), "-1"},
       {"0000:00:05.0", Under("pci0000:00/0000:00:05.0"), "-1"}},
      {"gpu-0", "gpu-1"},
      {{"gpu-1",
        {{"type", "string:gpu"},
         {"uuid", "string:GPU-b4b55dc0-1dcb-4cf0-a9bb-23c104796692"},
         {"productName", "string:Tesla T4"},
         {"brand", "string:Nvidia"},
         {"architecture", "string:Turing"},
         {"cudaComputeCapability", "version:7.5.0"},
         {"driverVersion", "version:580.126.20"},
         {"cudaDriverVersion", "version:13.0.0"},
         {kPci, "string:0000:00:05.0"},
         {kRoot, "string:pci0000:00"}},
        {{"memory", "15Gi"}},
        std::nullopt}}};
  return kCase;
}

const ProfileCase& Gb200() {
  static const ProfileCase kCase{
      "gb200-4x",
      {{"0008:01:00.0", Under("pci0008:00/0008:00:00.0/0008:01:00.0"), "0"},
       {"0009:01:00.0", Under("pci0009:00/0009:00:00.0/0009:01:00.0"), "0"},
       {"0018:01:00.0", Under("pci0018:00/0018:00:00.0/0018:01:00.0"), "1"},
       {"0019:01:00.0", Under("pci0019:00/0019:00:00.0/0019:01:00.0"), "1"}},
      {"gpu-0", "gpu-1", "gpu-2", "gpu-3"},
      {{"gpu-2",
        {{"type", "string:gpu"},
         {"uuid", "string:GPU-e7fd1343-c75d-4f1d-95b0-80a33751b52d"},
         {"productName", "string:NVIDIA GB200"},
         {"brand", "string:Nvidia"},
         {"architecture", "string:Blackwell"},
         {"cudaComputeCapability", "version:10.0.0"},
         {"driverVersion", "version:580.126.20"},
         {"cudaDriverVersion", "version:13.0.0"},
         {kPci, "string:0018:01:00.0"},
         {kRoot, "string:pci0018:00"},
         {kNuma, "int:1"},
         {"addressingMode", "string:ATS"}},
        {{"memory", "189471Mi"}},
        std::nullopt}}};
  return kCase;
}

// ---- Fixture: a mock driver root, a fake sysfs and an open NVML session ----

class MockNode {
 public:
  // `profile`: a shipped profile name or a path; `sysfs` laid out under <tmp>/sys.
  void Start(const std::string& profile, const std::vector<PciEntry>& sysfs) {
    const std::string root = dir_.path() + "/driver-root";
    absl::Status made = testing::MakeMockDriverRoot(profile, root);
    ASSERT_TRUE(made.ok()) << made;
    MakeSysfs(sysfs_root(), sysfs);
    fs::create_directories(sysfs_root());
    auto nvml = nvml::Nvml::Create(root);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = *std::move(nvml);
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
  }

  absl::StatusOr<Inventory> Discover(bool list_type_attributes = false) {
    if (!session_) return absl::FailedPreconditionError("mock node did not start");
    DiscoveryOptions options;
    options.sysfs_root = sysfs_root();
    options.list_type_attributes = list_type_attributes;
    return gpu::Discover(*session_, options);
  }

  // The UUID of the MIG device on GPU `parent_index` whose GPU instance starts at `start`.
  std::string MigUuidAt(unsigned int parent_index, unsigned int start) {
    nvml::Device parent = *session_->DeviceByIndex(parent_index);
    absl::StatusOr<std::vector<nvml::MigDevice>> migs = parent.MigDevices();
    if (!migs.ok()) {
      ADD_FAILURE() << migs.status();
      return "";
    }
    for (const nvml::MigDevice& mig : *migs) {
      nvml::GpuInstance gi = *parent.GpuInstanceById(*mig.GpuInstanceId());
      if (gi.Info()->placement.start == start) return *mig.Uuid();
    }
    ADD_FAILURE() << "no MIG device at " << parent_index << "/" << start;
    return "";
  }

  std::string sysfs_root() const { return dir_.path() + "/sys"; }
  const std::string& dir() const { return dir_.path(); }

 private:
  testing::TempDir dir_;
  std::unique_ptr<nvml::Nvml> nvml_;
  std::optional<nvml::Session> session_;
};

class DiscoverProfileTest : public ::testing::TestWithParam<const ProfileCase*> {
 protected:
  void SetUp() override { node_.Start(GetParam()->profile, GetParam()->sysfs); }
  MockNode node_;
};

TEST_P(DiscoverProfileTest, ExactNamesAttributesAndCapacities) {
  const ProfileCase& c = *GetParam();
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->driver_version, "580.126.20");
  EXPECT_THAT(Names(*inventory), ElementsAreArray(c.names));
  for (const ExpectedDevice& want : c.devices) {
    SCOPED_TRACE(want.name);
    const AllocatableDevice* got = inventory->Find(want.name);
    ASSERT_NE(got, nullptr);
    StringMap attributes = want.attributes;
    if (want.mig_at) {
      attributes["uuid"] = "string:" + node_.MigUuidAt(want.mig_at->first, want.mig_at->second);
    }
    EXPECT_EQ(got->published.name, want.name);
    EXPECT_EQ(Attributes(got->published), attributes);
    EXPECT_EQ(Capacity(got->published), want.capacity);
    EXPECT_TRUE(CheckDeviceLimits(got->published).ok());
  }
  for (const AllocatableDevice& d : inventory->devices) {
    EXPECT_EQ(d.published.name, d.name);
    EXPECT_EQ(d.type == DeviceType::kMig, d.mig.has_value()) << d.name;
    EXPECT_EQ(Render(d.published.attributes.at("type")),
              std::string("string:") + DeviceTypeName(d.type))
        << d.name;
    EXPECT_EQ(d.published.attributes.count("index") + d.published.attributes.count("minor"), 0u);
  }
}

TEST_P(DiscoverProfileTest, ListTypeNumaNode) {
  absl::StatusOr<Inventory> inventory = node_.Discover(/*list_type_attributes=*/true);
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  for (const ExpectedDevice& want : GetParam()->devices) {
    const AllocatableDevice* got = inventory->Find(want.name);
    ASSERT_NE(got, nullptr);
    auto numa = want.attributes.find(kNuma);
    if (numa == want.attributes.end()) {
      EXPECT_EQ(got->published.attributes.count(kNuma), 0u) << want.name;
    } else {
      EXPECT_EQ(Render(got->published.attributes.at(kNuma)), "ints:" + numa->second.substr(4))
          << want.name;
    }
  }
}

TEST_P(DiscoverProfileTest, WithoutSysfsTopologyIsOmitted) {
  fs::remove_all(node_.sysfs_root());
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_THAT(Names(*inventory), ElementsAreArray(GetParam()->names));
  for (const ExpectedDevice& want : GetParam()->devices) {
    const AllocatableDevice* got = inventory->Find(want.name);
    ASSERT_NE(got, nullptr);
    StringMap expected = want.attributes;
    expected.erase(kRoot);
    expected.erase(kNuma);
    StringMap attributes = Attributes(got->published);
    attributes.erase("uuid");
    expected.erase("uuid");
    EXPECT_EQ(attributes, expected) << want.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Profiles, DiscoverProfileTest,
                         ::testing::Values(&H100(), &A100Mig(), &T4(), &Gb200()),
                         [](const auto& info) {
                           std::string name = info.param->profile;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

TEST(DiscoverTest, GpuAndMigInfo) {
  MockNode node;
  node.Start("a100-mig-4x", A100Mig().sysfs);
  absl::StatusOr<Inventory> inventory = node.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  const AllocatableDevice* mig = inventory->Find("gpu-0-mig-3g20gb-9-4");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(mig->type, DeviceType::kMig);
  EXPECT_EQ(mig->gpu.uuid, "GPU-ddf71127-f4eb-4aa7-a105-64fce9969b05");
  EXPECT_EQ(mig->gpu.pci_bus_id, "0000:07:00.0");
  EXPECT_TRUE(mig->gpu.mig_capable);
  EXPECT_TRUE(mig->gpu.mig_enabled);
  ASSERT_TRUE(mig->mig.has_value());
  EXPECT_EQ(mig->mig->uuid, node.MigUuidAt(0, 4));
  EXPECT_EQ(mig->mig->parent_uuid, mig->gpu.uuid);
  EXPECT_EQ(mig->mig->parent_minor, 0u);
  EXPECT_EQ(mig->mig->parent_pci_bus_id, "0000:07:00.0");
  EXPECT_EQ(mig->mig->profile, "3g.20gb");
  EXPECT_EQ(mig->mig->gi_profile_id, 9u);
  EXPECT_EQ(mig->mig->placement_start, 4u);
  EXPECT_EQ(mig->mig->placement_size, 4u);
  EXPECT_GT(mig->mig->gi_id, 0u);  // only a GPU-wide instance gets id 0
  EXPECT_EQ(mig->mig->ci_id, 0u);
  EXPECT_EQ(inventory->Find("gpu-3"), nullptr);
  EXPECT_EQ(inventory->Find("gpu-0"), nullptr);  // the MIG parent is not announced
  EXPECT_EQ(inventory->Find("nope"), nullptr);
}

// The public driver's announcement lines (docs/compatibility.md "Log lines"), at level 0.
TEST(DiscoverTest, AnnouncesEachDeviceInThePublicDriversWordsAtLevelZero) {
  log::LogCapture logs(/*verbosity=*/0);
  MockNode mig_node;
  mig_node.Start("a100-mig-4x", A100Mig().sysfs);
  absl::StatusOr<Inventory> migs = mig_node.Discover();
  MockNode full_node;
  full_node.Start("h100-8x", H100().sysfs);
  absl::StatusOr<Inventory> gpus = full_node.Discover();
  ASSERT_TRUE(migs.ok()) << migs.status();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  const std::string all = logs.Text();
  EXPECT_THAT(all, HasSubstr("] \"Traverse GPU devices\" count=4\n"));
  EXPECT_THAT(all, HasSubstr("] \"Adding MIG device gpu-0-mig-3g20gb-9-4 to allocatable devices "
                             "(parent: gpu-0)\" uuid=\"" +
                             mig_node.MigUuidAt(0, 4) + "\"\n"));
  // GPU 3 of a100-mig-4x: MIG mode on, no MIG device.
  EXPECT_THAT(all, HasSubstr("] \"Physical GPU gpu-3 has MIG mode enabled but no configured MIG "
                             "devices\" uuid=\"GPU-"));
  EXPECT_THAT(all, HasSubstr("] \"Traverse GPU devices\" count=8\n"));
  EXPECT_THAT(all, HasSubstr("] \"Adding device gpu-7 to allocatable devices\" uuid=\"GPU-"));
}

TEST(DiscoverTest, FullGpuInfo) {
  MockNode node;
  node.Start("gb200-4x", Gb200().sysfs);
  absl::StatusOr<Inventory> inventory = node.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  const AllocatableDevice* gpu = inventory->Find("gpu-3");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->type, DeviceType::kGpu);
  EXPECT_FALSE(gpu->mig.has_value());
  EXPECT_EQ(gpu->gpu.uuid, "GPU-3958add3-f3a7-4ee1-a1b5-3c1b30d51682");
  EXPECT_EQ(gpu->gpu.minor, 3u);
  EXPECT_EQ(gpu->gpu.index, 3u);
  EXPECT_EQ(gpu->gpu.pci_bus_id, "0019:01:00.0");
  EXPECT_EQ(gpu->gpu.product_name, "NVIDIA GB200");
  EXPECT_TRUE(gpu->gpu.mig_capable);
  EXPECT_FALSE(gpu->gpu.mig_enabled);
  EXPECT_EQ(gpu->gpu.memory_bytes, uint64_t{189471} << 20);
  EXPECT_EQ(gpu->gpu.architecture, "Blackwell");
  EXPECT_EQ(gpu->gpu.brand, "Nvidia");
  EXPECT_EQ(gpu->gpu.pcie_root, "pci0019:00");
  EXPECT_EQ(gpu->gpu.numa_node, 1);
}

// ---- Modified profiles: error paths and tolerated gaps ----

class ModifiedProfileTest : public ::testing::Test {
 protected:
  // h100-8x with `edit` applied, written beside the node's temp files.
  void Start(const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(testing::ProfilePath("h100-8x"));
    nlohmann::json profile = nlohmann::json::parse(in);
    edit(profile);
    const std::string path = node_.dir() + "/profile.json";
    std::ofstream(path) << profile.dump(2);
    node_.Start(path, H100().sysfs);
  }
  MockNode node_;
};

TEST_F(ModifiedProfileTest, UnparsableDriverVersionIsAnError) {
  Start([](nlohmann::json& p) { p["driver_version"] = "580.126.x"; });
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_FALSE(inventory.ok());
  EXPECT_EQ(inventory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inventory.status().message(),
            "driver version: version \"580.126.x\" is not a semantic version");
}

TEST_F(ModifiedProfileTest, BadPciBusIdIsAnErrorNamingTheGpu) {
  // The mock prints bus 0x1ff as "1FF": three digits, which no valid BDF has.
  Start([](nlohmann::json& p) { p["gpus"][2]["pci_bus_id"] = "0000:1ff:00.0"; });
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_FALSE(inventory.ok());
  EXPECT_EQ(inventory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inventory.status().message(),
            "GPU GPU-4a0b0811-79e3-44a0-9355-10ab6e959e2c: PCI bus id: PCI bus id "
            "\"00000000:1FF:00.0\" is not of the form 0000:65:00.0");
}

TEST_F(ModifiedProfileTest, DgxDisplayIsSkipped) {
  Start([](nlohmann::json& p) {
    p["gpus"][1]["name"] = "NVIDIA DGX Display";
    p["gpus"][6]["name"] = "DGX Display";
  });
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_THAT(Names(*inventory),
              ElementsAreArray({"gpu-0", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-7"}));
}

TEST_F(ModifiedProfileTest, MemoryNotSupportedOmitsTheCapacity) {
  Start([](nlohmann::json& p) {
    p["forced_errors"] = {{"nvmlDeviceGetMemoryInfo_v2", 3}, {"nvmlDeviceGetMemoryInfo", 3}};
  });
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  ASSERT_EQ(inventory->devices.size(), 8u);
  for (const AllocatableDevice& d : inventory->devices) {
    EXPECT_TRUE(d.published.capacity.empty()) << d.name;
    EXPECT_FALSE(d.gpu.memory_bytes.has_value()) << d.name;
  }
}

TEST_F(ModifiedProfileTest, OtherNvmlErrorsAreFatalAndNameTheStep) {
  Start([](nlohmann::json& p) { p["forced_errors"] = {{"nvmlDeviceGetBrand", 999}}; });
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_FALSE(inventory.ok());
  EXPECT_THAT(inventory.status().message(),
              HasSubstr("GPU GPU-ef4a70d5-c51a-40ee-94f7-3e1e08903425: read brand: "
                        "nvmlDeviceGetBrand: "));
}

TEST_F(ModifiedProfileTest, AddressingModeNotSupportedIsOmitted) {
  Start([](nlohmann::json& p) { p["forced_errors"] = {{"nvmlDeviceGetAddressingMode", 3}}; });
  absl::StatusOr<Inventory> inventory = node_.Discover();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  for (const AllocatableDevice& d : inventory->devices) {
    EXPECT_EQ(d.published.attributes.count("addressingMode"), 0u) << d.name;
  }
}

// ---- Helpers ----

TEST(NormalizeSemverTest, Table) {
  const std::pair<std::string, std::string> good[] = {
      {"580.126.20", "580.126.20"},
      {"8.0", "8.0.0"},
      {"13", "13.0.0"},
      {"v1.2.3", "1.2.3"},
      {"535.104.05", "535.104.5"},
      {"1.2.3-rc.1+build.5", "1.2.3-rc.1+build.5"},
      {"1.2-beta", "1.2.0-beta"},
      {"1.2.3+meta-data.01", "1.2.3+meta-data.01"},
  };
  for (const auto& [in, want] : good) {
    absl::StatusOr<std::string> got = NormalizeSemver(in);
    ASSERT_TRUE(got.ok()) << in << ": " << got.status();
    EXPECT_EQ(*got, want);
  }
  for (const char* bad :
       {"", "abc", "1.2.3.4", "1..2", "1.", ".1", "1.2.x", "1.2.3-", "1.2.3-01", "1.2.3+",
        "1.2.3-a..b", "v", "1.2.3 ", "-1.2.3", "99999999999999999999999.0.0"}) {
    absl::StatusOr<std::string> got = NormalizeSemver(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().message(),
              std::string("version \"") + bad + "\" is not a semantic version");
  }
}

TEST(CudaDriverVersionTest, Table) {
  EXPECT_EQ(CudaDriverVersionString(13000), "13.0.0");
  EXPECT_EQ(CudaDriverVersionString(12040), "12.4.0");
  EXPECT_EQ(CudaDriverVersionString(12020), "12.2.0");
  EXPECT_EQ(CudaDriverVersionString(11080), "11.8.0");
}

k8s::Device DeviceWith(size_t attributes, size_t capacities) {
  k8s::Device d;
  d.name = "gpu-0";
  for (size_t i = 0; i < attributes; ++i) {
    d.attributes["a" + std::to_string(i)] = k8s::DeviceAttribute::Int(1);
  }
  for (size_t i = 0; i < capacities; ++i) {
    d.capacity["c" + std::to_string(i)].value = k8s::Quantity::FromInt64(1);
  }
  return d;
}

TEST(CheckDeviceLimitsTest, Table) {
  EXPECT_TRUE(CheckDeviceLimits(DeviceWith(14, 15)).ok());
  EXPECT_TRUE(CheckDeviceLimits(DeviceWith(20, 12)).ok());
  absl::Status too_many = CheckDeviceLimits(DeviceWith(20, 13));
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_many.message(),
            "device gpu-0: 33 attributes and capacities, more than 32 (ResourceSlice limit)");

  k8s::Device list = DeviceWith(10, 10);
  list.attributes["a0"].int_value.reset();
  list.attributes["a0"].int_values = std::vector<int64_t>(28, 0);  // 9 + 28 + 10 = 47
  EXPECT_TRUE(CheckDeviceLimits(list).ok());
  list.attributes["a0"].int_values.resize(30);  // 49
  EXPECT_THAT(CheckDeviceLimits(list).message(), HasSubstr("49 attribute values"));

  k8s::Device long_value = DeviceWith(1, 1);
  long_value.attributes["productName"] = k8s::DeviceAttribute::String(std::string(65, 'x'));
  EXPECT_THAT(CheckDeviceLimits(long_value).message(), HasSubstr("attribute productName"));

  k8s::Device long_name = DeviceWith(1, 1);
  long_name.name = std::string(64, 'g');
  EXPECT_FALSE(CheckDeviceLimits(long_name).ok());
}

TEST(DeviceTypeTest, Names) {
  EXPECT_STREQ(DeviceTypeName(DeviceType::kGpu), "gpu");
  EXPECT_STREQ(DeviceTypeName(DeviceType::kMig), "mig");
  EXPECT_STREQ(DeviceTypeName(DeviceType::kVfio), "vfio");
}

}  // namespace
}  // namespace dra::gpu
