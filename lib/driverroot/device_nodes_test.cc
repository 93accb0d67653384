#include "lib/driverroot/device_nodes.h"

#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/driverroot/fake_root_for_test.h"

namespace dra::driverroot {
namespace {

using test_util::CanMknod;
using test_util::FakeRoot;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kProcDevices[] = R"(Character devices:
  1 mem
  4 /dev/vc/0
195 nvidia-frontend
237 nvidia-caps-imex-channels
238 nvidia-uvm
239 nvidia-caps

Block devices:
  7 loop
240 nvidia-caps
)";

std::unique_ptr<DriverRoot> MustCreate(const FakeRoot& fake) {
  absl::StatusOr<std::unique_ptr<DriverRoot>> root = DriverRoot::Create(
      {.root = fake.path(), .proc_root = fake.Abs("/proc"), .sys_root = fake.Abs("/sys")});
  EXPECT_TRUE(root.ok()) << root.status();
  return root.ok() ? std::move(*root) : nullptr;
}

TEST(ParseCapabilityFile, Cases) {
  struct Case {
    std::string text;
    bool ok;
    int64_t minor;
    uint32_t mode;
  } cases[] = {
      {"DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n", true, 12, 0444},
      {"  DeviceFileMode:   420\r\nDeviceFileMinor:7", true, 7, 0644},
      {"DeviceFileMinor: 12\n", false, 0, 0},
      {"DeviceFileMode: 292\n", false, 0, 0},
      {"DeviceFileMinor: -1\nDeviceFileMode: 292\n", false, 0, 0},
      {"DeviceFileMinor: x\nDeviceFileMode: 292\n", false, 0, 0},
      {"DeviceFileMinor: 1\nDeviceFileMode: 99999\n", false, 0, 0},
      {"", false, 0, 0},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CapabilityFile> got = ParseCapabilityFile(c.text);
    EXPECT_EQ(got.ok(), c.ok) << c.text;
    if (got.ok() && c.ok) {
      EXPECT_EQ(got->minor, c.minor) << c.text;
      EXPECT_EQ(got->mode, c.mode) << c.text;
    }
  }
}

TEST(CharDeviceMajor, ReadsOnlyTheCharacterSection) {
  FakeRoot fake;
  fake.File("/proc/devices", kProcDevices);
  auto root = MustCreate(fake);
  EXPECT_EQ(*CharDeviceMajor(*root, "nvidia-caps"), 239);
  EXPECT_EQ(*CharDeviceMajor(*root, "nvidia-uvm"), 238);
  EXPECT_TRUE(absl::IsNotFound(CharDeviceMajor(*root, "loop").status()));
  absl::StatusOr<int64_t> missing = CharDeviceMajor(*root, "nvidia-nvswitch");
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no character device \"nvidia-nvswitch\" in " + fake.Abs("/proc/devices")));
}

TEST(CharDeviceMajor, ReadsTheAlternateProcDevicesFile) {
  FakeRoot fake;
  fake.File("/proc/devices", "Character devices:\n239 nvidia-caps\n");
  fake.File("/alt/devices", "Character devices:\n500 nvidia-caps\n");
  absl::StatusOr<std::unique_ptr<DriverRoot>> root =
      DriverRoot::Create({.root = fake.path(),
                          .proc_root = fake.Abs("/proc"),
                          .proc_devices = fake.Abs("/alt/devices"),
                          .sys_root = fake.Abs("/sys")});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ((*root)->proc_devices(), fake.Abs("/alt/devices"));
  EXPECT_EQ(*CharDeviceMajor(**root, "nvidia-caps"), 500);
  EXPECT_EQ(MustCreate(fake)->proc_devices(), fake.Abs("/proc/devices"));
  absl::StatusOr<std::unique_ptr<DriverRoot>> relative = DriverRoot::Create(
      {.root = fake.path(), .proc_root = fake.Abs("/proc"), .proc_devices = "alt/devices"});
  EXPECT_THAT(std::string(relative.status().message()),
              HasSubstr("proc devices file must be an absolute path, got \"alt/devices\""));
}

TEST(MigCapabilityDeviceNodes, BuildsNodesFromProc) {
  FakeRoot fake;
  fake.File("/proc/devices", kProcDevices);
  const std::string gi = "/proc/driver/nvidia/capabilities/gpu3/mig/gi5";
  fake.File(gi + "/access", "DeviceFileMinor: 102\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  fake.File(gi + "/ci1/access", "DeviceFileMinor: 117\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  auto root = MustCreate(fake);
  absl::StatusOr<std::vector<DeviceNodeInfo>> nodes = MigCapabilityDeviceNodes(*root, 3, 5, 1);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_THAT(*nodes, ElementsAre(DeviceNodeInfo{.path = "/dev/nvidia-caps/nvidia-cap102",
                                                 .type = 'c',
                                                 .major = 239,
                                                 .minor = 102,
                                                 .mode = 0444},
                                  DeviceNodeInfo{.path = "/dev/nvidia-caps/nvidia-cap117",
                                                 .type = 'c',
                                                 .major = 239,
                                                 .minor = 117,
                                                 .mode = 0444}));

  absl::StatusOr<std::vector<DeviceNodeInfo>> no_ci = MigCapabilityDeviceNodes(*root, 3, 5, 2);
  ASSERT_FALSE(no_ci.ok());
  EXPECT_TRUE(absl::IsNotFound(no_ci.status()));
  EXPECT_THAT(std::string(no_ci.status().message()), HasSubstr(gi + "/ci2/access"));

  fake.File(gi + "/ci3/access", "garbage");
  absl::StatusOr<std::vector<DeviceNodeInfo>> bad = MigCapabilityDeviceNodes(*root, 3, 5, 3);
  EXPECT_THAT(
      std::string(bad.status().message()),
      HasSubstr("parse " + fake.Abs(gi + "/ci3/access") + ": no valid \"DeviceFileMinor:\""));
}

TEST(StatDeviceNode, RegularFileIsNotADevice) {
  FakeRoot fake;
  fake.File("/dev/nvidiactl");
  auto root = MustCreate(fake);
  absl::StatusOr<DeviceNodeInfo> node = StatDeviceNode(*root, "/dev/nvidiactl");
  EXPECT_TRUE(absl::IsFailedPrecondition(node.status())) << node.status();
  EXPECT_TRUE(absl::IsNotFound(StatDeviceNode(*root, "/dev/nvidia0").status()));
  // Not fatal for the control nodes: skipped.
  absl::StatusOr<std::vector<DeviceNodeInfo>> control = ControlDeviceNodes(*root);
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_TRUE(control->empty());
}

class DeviceNodesAsRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanMknod()) GTEST_SKIP() << "needs permission to mknod";
  }
};

TEST_F(DeviceNodesAsRoot, StatReadsNumbersModeAndOwner) {
  FakeRoot fake;
  ASSERT_TRUE(fake.CharDevice("/dev/nvidiactl", 195, 255, 0660));
  ASSERT_EQ(::chown(fake.Abs("/dev/nvidiactl").c_str(), 0, 44), 0);
  auto root = MustCreate(fake);
  absl::StatusOr<DeviceNodeInfo> node = StatDeviceNode(*root, "/dev/nvidiactl");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(*node, (DeviceNodeInfo{.path = "/dev/nvidiactl",
                                   .host_path = fake.Abs("/dev/nvidiactl"),
                                   .type = 'c',
                                   .major = 195,
                                   .minor = 255,
                                   .mode = 0660,
                                   .uid = 0,
                                   .gid = 44}));
}

TEST_F(DeviceNodesAsRoot, ControlNodesInOrderSkippingMissingAndFiles) {
  FakeRoot fake;
  ASSERT_TRUE(fake.CharDevice("/dev/nvidia-modeset", 195, 254));
  ASSERT_TRUE(fake.CharDevice("/dev/nvidiactl", 195, 255));
  ASSERT_TRUE(fake.CharDevice("/dev/nvidia-uvm", 238, 0));
  fake.File("/dev/nvidia-uvm-tools");  // an empty file, as in a mock root built without root
  auto root = MustCreate(fake);
  absl::StatusOr<std::vector<DeviceNodeInfo>> nodes = ControlDeviceNodes(*root);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  std::vector<std::string> paths;
  for (const DeviceNodeInfo& n : *nodes) paths.push_back(n.path);
  EXPECT_THAT(paths, ElementsAre("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-modeset"));
  EXPECT_EQ((*nodes)[1].major, 238);
}

TEST_F(DeviceNodesAsRoot, GpuNodeAndDrmNodes) {
  FakeRoot fake;
  ASSERT_TRUE(fake.CharDevice("/dev/nvidia3", 195, 3));
  ASSERT_TRUE(fake.CharDevice("/dev/dri/card1", 226, 1));
  ASSERT_TRUE(fake.CharDevice("/dev/dri/renderD128", 226, 128));
  fake.Dir("/sys/bus/pci/devices/0000:65:00.0/drm/card1");
  fake.Dir("/sys/bus/pci/devices/0000:65:00.0/drm/renderD128");
  fake.Dir("/sys/bus/pci/devices/0000:65:00.0/drm/card9");  // node missing: skipped
  fake.Dir("/sys/bus/pci/devices/0000:65:00.0/drm/version");
  auto root = MustCreate(fake);

  absl::StatusOr<std::vector<DeviceNodeInfo>> nodes = GpuDeviceNodes(*root, 3, "00000000:65:00.0");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  std::vector<std::string> paths;
  for (const DeviceNodeInfo& n : *nodes) paths.push_back(n.path);
  EXPECT_THAT(paths, ElementsAre("/dev/nvidia3", "/dev/dri/card1", "/dev/dri/renderD128"));
  EXPECT_EQ((*nodes)[2].minor, 128);

  absl::StatusOr<std::vector<DeviceNodeInfo>> no_drm = GpuDeviceNodes(*root, 3, "0000:66:00.0");
  ASSERT_TRUE(no_drm.ok());
  EXPECT_EQ(no_drm->size(), 1u);
  absl::StatusOr<std::vector<DeviceNodeInfo>> no_bus = GpuDeviceNodes(*root, 3, "");
  EXPECT_EQ(no_bus->size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(GpuDeviceNodes(*root, 4, "").status()));
}

}  // namespace
}  // namespace dra::driverroot
