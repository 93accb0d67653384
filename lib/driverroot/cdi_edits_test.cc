#include "lib/driverroot/cdi_edits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdi/validate.h"
#include "lib/cdi/version.h"
#include "lib/driverroot/fake_root_for_test.h"

namespace dra::driverroot {
namespace {

using test_util::CanMknod;
using test_util::FakeRoot;

const std::vector<std::string> kRo = {"ro", "nosuid", "nodev", "rbind", "rprivate"};
const std::vector<std::string> kIpc = {"nosuid", "nodev", "rbind", "rprivate", "noexec"};

TEST(ToCdiDeviceNode, CopiesNumbersAndOmitsSameHostPath) {
  DeviceNodeInfo ctl{.path = "/dev/nvidiactl",
                     .host_path = "/driver-root/dev/nvidiactl",
                     .type = 'c',
                     .major = 195,
                     .minor = 255,
                     .mode = 0666,
                     .uid = 0,
                     .gid = 0};
  EXPECT_EQ(ToCdiDeviceNode(ctl), (cdi::DeviceNode{.path = "/dev/nvidiactl",
                                                   .host_path = "/driver-root/dev/nvidiactl",
                                                   .type = "c",
                                                   .major = 195,
                                                   .minor = 255,
                                                   .file_mode = 0666,
                                                   .permissions = "rwm",
                                                   .uid = 0,
                                                   .gid = 0}));
  ctl.host_path = "/dev/nvidiactl";
  EXPECT_EQ(ToCdiDeviceNode(ctl).host_path, "");
  DeviceNodeInfo cap{.path = "/dev/nvidia-caps/nvidia-cap12",
                     .type = 'c',
                     .major = 239,
                     .minor = 12,
                     .mode = 0444};
  EXPECT_EQ(ToCdiDeviceNode(cap), (cdi::DeviceNode{.path = "/dev/nvidia-caps/nvidia-cap12",
                                                   .type = "c",
                                                   .major = 239,
                                                   .minor = 12,
                                                   .file_mode = 0444,
                                                   .permissions = "rwm"}));
}

TEST(CommonEdits, FromDiscoveredFiles) {
  DriverFiles files;
  files.driver_version = "550.54.15";
  files.libraries = {{"/dr/usr/lib/libcuda.so.550.54.15", "/usr/lib/libcuda.so.1"},
                     {"/dr/usr/lib/libcuda.so.550.54.15", "/usr/lib/libcuda.so.550.54.15"}};
  files.firmware = {{"/dr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
                     "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin"}};
  files.binaries = {{"/dr/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"}};
  files.ipc = {{"/dr/run/nvidia-persistenced/socket", "/run/nvidia-persistenced/socket"},
               {"/dr/tmp/nvidia-mps", "/tmp/nvidia-mps"}};
  files.control_devices = {
      {.path = "/dev/nvidiactl",
       .host_path = "/dr/dev/nvidiactl",
       .type = 'c',
       .major = 195,
       .minor = 255,
       .mode = 0666,
       .uid = 0,
       .gid = 0},
      {.path = "/dev/nvidia-uvm",
       .host_path = "/dr/dev/nvidia-uvm",
       .type = 'c',
       .major = 238,
       .minor = 0,
       .mode = 0660,
       .uid = 0,
       .gid = 44},
      {.path = "/dev/nvidia-modeset",
       .host_path = "/dr/dev/nvidia-modeset",
       .type = 'c',
       .major = 195,
       .minor = 254,
       .mode = 0660,
       .uid = 0,
       .gid = 44},
  };
  files.libcuda_dir = "/usr/lib";

  cdi::ContainerEdits want;
  want.env = {"NVIDIA_CTK_LIBCUDA_DIR=/usr/lib"};
  want.device_nodes = {
      {.path = "/dev/nvidiactl",
       .host_path = "/dr/dev/nvidiactl",
       .type = "c",
       .major = 195,
       .minor = 255,
       .file_mode = 0666,
       .permissions = "rwm",
       .uid = 0,
       .gid = 0},
      {.path = "/dev/nvidia-uvm",
       .host_path = "/dr/dev/nvidia-uvm",
       .type = "c",
       .major = 238,
       .minor = 0,
       .file_mode = 0660,
       .permissions = "rwm",
       .uid = 0,
       .gid = 44},
      {.path = "/dev/nvidia-modeset",
       .host_path = "/dr/dev/nvidia-modeset",
       .type = "c",
       .major = 195,
       .minor = 254,
       .file_mode = 0660,
       .permissions = "rwm",
       .uid = 0,
       .gid = 44},
  };
  want.mounts = {
      {"/dr/usr/lib/libcuda.so.550.54.15", "/usr/lib/libcuda.so.1", "", kRo},
      {"/dr/usr/lib/libcuda.so.550.54.15", "/usr/lib/libcuda.so.550.54.15", "", kRo},
      {"/dr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin",
       "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", "", kRo},
      {"/dr/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi", "", kRo},
      {"/dr/run/nvidia-persistenced/socket", "/run/nvidia-persistenced/socket", "", kIpc},
      {"/dr/tmp/nvidia-mps", "/tmp/nvidia-mps", "", kIpc},
  };
  want.additional_gids = {44};
  EXPECT_EQ(CommonEdits(files), want);
}

TEST(CommonEdits, EmptyDiscoveryGivesEmptyEdits) {
  EXPECT_TRUE(CommonEdits(DriverFiles{}).empty());
}

// Discovery -> common edits -> a spec -> transformed to the host driver root -> valid.
TEST(CommonEdits, EndToEndSpecUnderAHostDriverRoot) {
  FakeRoot fake;
  fake.File("/usr/lib64/libcuda.so.550.54.15");
  fake.Symlink("/usr/lib64/libcuda.so.1", "libcuda.so.550.54.15");
  fake.File("/usr/bin/nvidia-smi", "", 0755);
  const bool devices = CanMknod();
  if (devices) {
    ASSERT_TRUE(fake.CharDevice("/dev/nvidiactl", 195, 255));
    ASSERT_TRUE(fake.CharDevice("/dev/nvidia0", 195, 0));
  }
  absl::StatusOr<std::unique_ptr<DriverRoot>> root =
      DriverRoot::Create({.root = fake.path(), .host_root = "/run/nvidia/driver"});
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<DriverFiles> files = DiscoverDriverFiles(**root, "550.54.15");
  ASSERT_TRUE(files.ok()) << files.status();

  cdi::Spec spec;
  spec.kind = "k8s.gpu.example.com/claim";
  spec.container_edits = CommonEdits(*files);
  cdi::Device device{.name = "0c1d-gpu-0"};
  if (devices) {
    absl::StatusOr<std::vector<DeviceNodeInfo>> gpu = GpuDeviceNodes(**root, 0, "");
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    device.container_edits = DeviceNodeEdits(*gpu);
  } else {
    device.container_edits.env = {"GPU=0"};
  }
  spec.devices.push_back(device);
  (*root)->TransformSpec(spec);
  spec.version = cdi::MinimumVersion(spec).version;
  EXPECT_TRUE(cdi::ValidateSpec(spec).ok()) << cdi::ValidateSpec(spec);

  const cdi::ContainerEdits& e = spec.container_edits;
  ASSERT_EQ(e.mounts.size(), 3u);
  EXPECT_EQ(e.mounts[0].host_path, "/run/nvidia/driver/usr/lib64/libcuda.so.550.54.15");
  EXPECT_EQ(e.mounts[0].container_path, "/usr/lib64/libcuda.so.1");
  EXPECT_EQ(e.mounts[2].host_path, "/run/nvidia/driver/usr/bin/nvidia-smi");
  EXPECT_EQ(e.env, std::vector<std::string>{"NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64"});
  if (devices) {
    ASSERT_EQ(e.device_nodes.size(), 1u);
    EXPECT_EQ(e.device_nodes[0].host_path, "/run/nvidia/driver/dev/nvidiactl");
    EXPECT_EQ(spec.devices[0].container_edits.device_nodes[0].host_path,
              "/run/nvidia/driver/dev/nvidia0");
    EXPECT_EQ(spec.devices[0].container_edits.device_nodes[0].minor, 0);
  }
}

}  // namespace
}  // namespace dra::driverroot
