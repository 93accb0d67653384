// pcieRoot and numaNode from a fake sysfs tree laid out as the kernel does:
//   <root>/bus/pci/devices/0000:65:00.0 -> ../../../devices/pci0000:64/0000:64:00.0/0000:65:00.0
//   <root>/devices/pci0000:64/0000:64:00.0/0000:65:00.0/numa_node

#include "lib/gpuplugin/inventory/sysfs.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Links bus/pci/devices/<bdf> to `target` and, when `numa` is set, writes the numa_node file
// into the directory the link resolves to.
void AddPciDevice(const std::string& root, const std::string& bdf, const std::string& target,
                  const std::optional<std::string>& numa) {
  const fs::path link = fs::path(root) / "bus/pci/devices" / bdf;
  fs::create_directories(link.parent_path());
  const fs::path dir =
      fs::path(target).is_absolute() ? fs::path(target) : link.parent_path() / target;
  fs::create_directories(dir);
  fs::create_symlink(target, link);
  if (numa) std::ofstream(dir / "numa_node") << *numa;
}

class SysfsTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::string root() const { return dir_.path() + "/sys"; }
};

TEST_F(SysfsTest, PcieRootFromRelativeLink) {
  AddPciDevice(root(), "0000:65:00.0", "../../../devices/pci0000:64/0000:64:00.0/0000:65:00.0",
               "0\n");
  absl::StatusOr<std::string> pcie_root = ReadPcieRoot(root(), "0000:65:00.0");
  ASSERT_TRUE(pcie_root.ok()) << pcie_root.status();
  EXPECT_EQ(*pcie_root, "pci0000:64");
  // A trailing slash on the root changes nothing.
  EXPECT_EQ(*ReadPcieRoot(root() + "/", "0000:65:00.0"), "pci0000:64");
}

TEST_F(SysfsTest, PcieRootFromAbsoluteLinkAndDirectChild) {
  AddPciDevice(root(), "0008:01:00.0", root() + "/devices/pci0008:00/0008:00:00.0/0008:01:00.0",
               std::nullopt);
  EXPECT_EQ(*ReadPcieRoot(root(), "0008:01:00.0"), "pci0008:00");
  AddPciDevice(root(), "0000:00:04.0", "../../../devices/pci0000:00/0000:00:04.0", std::nullopt);
  EXPECT_EQ(*ReadPcieRoot(root(), "0000:00:04.0"), "pci0000:00");
}

TEST_F(SysfsTest, PcieRootErrors) {
  absl::StatusOr<std::string> missing = ReadPcieRoot(root(), "0000:65:00.0");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("read link " + root() + "/bus/pci/devices/0000:65:00.0"));

  // Not a link at all.
  fs::create_directories(root() + "/bus/pci/devices/0000:66:00.0");
  EXPECT_FALSE(ReadPcieRoot(root(), "0000:66:00.0").ok());

  // Outside <root>/devices.
  AddPciDevice(root(), "0000:67:00.0", "../../../elsewhere/pci0000:64/0000:67:00.0", std::nullopt);
  absl::StatusOr<std::string> outside = ReadPcieRoot(root(), "0000:67:00.0");
  ASSERT_FALSE(outside.ok());
  EXPECT_THAT(outside.status().message(), HasSubstr("outside"));

  // Under devices/, but not below a PCIe root complex.
  AddPciDevice(root(), "0000:68:00.0", "../../../devices/platform/0000:68:00.0", std::nullopt);
  absl::StatusOr<std::string> platform = ReadPcieRoot(root(), "0000:68:00.0");
  ASSERT_FALSE(platform.ok());
  EXPECT_THAT(platform.status().message(), HasSubstr("platform is not a PCIe root"));

  // Pointing at devices/ itself.
  AddPciDevice(root(), "0000:69:00.0", "../../../devices", std::nullopt);
  EXPECT_FALSE(ReadPcieRoot(root(), "0000:69:00.0").ok());
}

TEST_F(SysfsTest, NumaNode) {
  struct Case {
    std::string bdf;
    std::optional<std::string> file;  // nullopt: no numa_node file
    std::optional<int> want;
  };
  const Case cases[] = {
      {"0000:10:00.0", "0\n", 0},
      {"0000:11:00.0", "1", 1},
      {"0000:12:00.0", " 3 \n", 3},
      {"0000:13:00.0", "-1\n", std::nullopt},  // no affinity
      {"0000:14:00.0", std::nullopt, std::nullopt},
  };
  for (const Case& c : cases) {
    AddPciDevice(root(), c.bdf, "../../../devices/pci0000:00/" + c.bdf, c.file);
    absl::StatusOr<std::optional<int>> numa = ReadNumaNode(root(), c.bdf);
    ASSERT_TRUE(numa.ok()) << c.bdf << ": " << numa.status();
    EXPECT_EQ(*numa, c.want) << c.bdf;
  }
  // No device entry at all.
  absl::StatusOr<std::optional<int>> absent = ReadNumaNode(root(), "0000:99:00.0");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->has_value());
}

TEST_F(SysfsTest, NumaNodeGarbageIsAnError) {
  for (const char* text : {"zero\n", "", "1x", "99999999999"}) {
    const std::string bdf = "0000:20:00.0";
    fs::remove_all(root());
    AddPciDevice(root(), bdf, "../../../devices/pci0000:00/" + bdf, std::string(text));
    absl::StatusOr<std::optional<int>> numa = ReadNumaNode(root(), bdf);
    ASSERT_FALSE(numa.ok()) << text;
    EXPECT_THAT(numa.status().message(), HasSubstr("numa_node")) << text;
    EXPECT_THAT(numa.status().message(), HasSubstr("is not an integer")) << text;
  }
}

TEST(NormalizePciBusIdTest, Table) {
  const std::pair<std::string, std::string> good[] = {
      {"00000000:65:00.0", "0000:65:00.0"}, {"00000008:01:00.0", "0008:01:00.0"},
      {"0000:65:00.0", "0000:65:00.0"},     {"00000000:AB:1F.7", "0000:ab:1f.7"},
      {"0000ABCD:00:00.0", "abcd:00:00.0"},
  };
  for (const auto& [in, want] : good) {
    absl::StatusOr<std::string> got = NormalizePciBusId(in);
    ASSERT_TRUE(got.ok()) << in << ": " << got.status();
    EXPECT_EQ(*got, want);
  }
  for (const char* bad : {"", "00000000:1FF:00.0", "65:00.0", "0000:65:00", "0000:6g:00.0",
                          "00010000:65:00.0", "0000:65:00.0 ", "0000-65-00.0", "0000:65:00.10"}) {
    absl::StatusOr<std::string> got = NormalizePciBusId(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_THAT(got.status().message(), HasSubstr(std::string("\"") + bad + "\""));
  }
}

}  // namespace
}  // namespace dra::gpu
