#include "lib/driverroot/discovery.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/driverroot/fake_root_for_test.h"

namespace dra::driverroot {
namespace {

using test_util::CanMknod;
using test_util::FakeRoot;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kVersion[] = "550.54.15";
constexpr char kLibDir[] = "/usr/lib/x86_64-linux-gnu";

// A driver installation laid out like a Debian/Ubuntu host with merged /usr.
void Populate(const FakeRoot& fake) {
  const std::string lib = kLibDir;
  fake.File(lib + "/libcuda.so.550.54.15");
  fake.Symlink(lib + "/libcuda.so.1", "libcuda.so.550.54.15");
  fake.Symlink(lib + "/libcuda.so", "libcuda.so.1");
  fake.File(lib + "/libnvidia-ml.so.550.54.15");
  fake.Symlink(lib + "/libnvidia-ml.so.1", "libnvidia-ml.so.550.54.15");
  fake.File(lib + "/libnvidia-ptxjitcompiler.so.550.54.15");
  fake.File(lib + "/libnvidia-ml.so.535.104.05");  // a stale older driver: not ours
  fake.File(lib + "/libz.so.1.2.13");              // not a driver library
  fake.Symlink(lib + "/libz.so.1", "libz.so.1.2.13");
  fake.Symlink(lib + "/libdangling.so.1", "libgone.so.550.54.15");
  fake.File(lib + "/vdpau/libvdpau_nvidia.so.550.54.15");
  fake.File("/usr/lib64/libnvidia-egl-gbm.so.550.54.15");
  fake.Symlink("/lib64", "/usr/lib64");  // absolute link: scanned once, as /usr/lib64
  fake.Symlink("/lib", "usr/lib");       // relative link: /lib/x86_64-linux-gnu is a duplicate
  fake.File("/usr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin");
  fake.File("/usr/lib/firmware/nvidia/550.54.15/gsp_tu10x.bin");
  fake.File("/usr/lib/firmware/nvidia/550.54.15/README");
  fake.File("/usr/lib/firmware/nvidia/535.104.05/gsp_ga10x.bin");
  fake.File("/usr/bin/nvidia-smi", "", 0755);
  fake.File("/usr/bin/nvidia-debugdump", "", 0755);
  fake.File("/usr/sbin/nvidia-persistenced", "", 0755);
  fake.File("/usr/local/bin/nvidia-imex", "", 0755);
  fake.Symlink("/bin", "usr/bin");
  fake.Socket("/run/nvidia-persistenced/socket");
  fake.Symlink("/var/run", "/run");
  fake.Dir("/tmp/nvidia-mps");
}

std::vector<std::string> ContainerPaths(const std::vector<DriverFile>& files) {
  std::vector<std::string> out;
  for (const DriverFile& f : files) out.push_back(f.container_path);
  return out;
}

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Populate(fake_);
    // An empty /dev of the root's own: without one the dev root is the host's (/), and the
    // result would depend on this machine's devices.
    std::filesystem::create_directories(fake_.Abs("/dev"));
    absl::StatusOr<std::unique_ptr<DriverRoot>> root =
        DriverRoot::Create({.root = fake_.path(), .proc_root = fake_.Abs("/proc")});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
  }

  FakeRoot fake_;
  std::unique_ptr<DriverRoot> root_;
};

TEST_F(DiscoveryTest, DetectsTheVersionFromLibnvidiaMl) {
  absl::StatusOr<std::string> version = DetectDriverVersion(*root_);
  ASSERT_TRUE(version.ok()) << version.status();
  // Two versions are installed; the directory listing is sorted, so the first is the older one.
  EXPECT_EQ(*version, "535.104.05");
}

TEST_F(DiscoveryTest, FindsEverythingOnce) {
  absl::StatusOr<DriverFiles> files = DiscoverDriverFiles(*root_, kVersion);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->driver_version, kVersion);
  const std::string lib = kLibDir;
  EXPECT_THAT(
      files->libraries,
      ElementsAre(
          DriverFile{fake_.Abs(lib + "/libcuda.so.550.54.15"), lib + "/libcuda.so"},
          DriverFile{fake_.Abs(lib + "/libcuda.so.550.54.15"), lib + "/libcuda.so.1"},
          DriverFile{fake_.Abs(lib + "/libcuda.so.550.54.15"), lib + "/libcuda.so.550.54.15"},
          DriverFile{fake_.Abs(lib + "/libnvidia-ml.so.550.54.15"), lib + "/libnvidia-ml.so.1"},
          DriverFile{fake_.Abs(lib + "/libnvidia-ml.so.550.54.15"),
                     lib + "/libnvidia-ml.so.550.54.15"},
          DriverFile{fake_.Abs(lib + "/libnvidia-ptxjitcompiler.so.550.54.15"),
                     lib + "/libnvidia-ptxjitcompiler.so.550.54.15"},
          DriverFile{fake_.Abs(lib + "/vdpau/libvdpau_nvidia.so.550.54.15"),
                     lib + "/vdpau/libvdpau_nvidia.so.550.54.15"},
          DriverFile{fake_.Abs("/usr/lib64/libnvidia-egl-gbm.so.550.54.15"),
                     "/usr/lib64/libnvidia-egl-gbm.so.550.54.15"}));
  EXPECT_EQ(files->libcuda_dir, lib);
  EXPECT_THAT(files->firmware,
              ElementsAre(DriverFile{fake_.Abs("/usr/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin"),
                                     "/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin"},
                          DriverFile{fake_.Abs("/usr/lib/firmware/nvidia/550.54.15/gsp_tu10x.bin"),
                                     "/lib/firmware/nvidia/550.54.15/gsp_tu10x.bin"}));
  EXPECT_THAT(
      files->binaries,
      ElementsAre(
          DriverFile{fake_.Abs("/usr/bin/nvidia-smi"), "/usr/bin/nvidia-smi"},
          DriverFile{fake_.Abs("/usr/bin/nvidia-debugdump"), "/usr/bin/nvidia-debugdump"},
          DriverFile{fake_.Abs("/usr/sbin/nvidia-persistenced"), "/usr/sbin/nvidia-persistenced"},
          DriverFile{fake_.Abs("/usr/local/bin/nvidia-imex"), "/usr/local/bin/nvidia-imex"}));
  EXPECT_THAT(files->ipc, ElementsAre(DriverFile{fake_.Abs("/run/nvidia-persistenced/socket"),
                                                 "/run/nvidia-persistenced/socket"},
                                      DriverFile{fake_.Abs("/tmp/nvidia-mps"), "/tmp/nvidia-mps"}));
  EXPECT_THAT(files->control_devices, IsEmpty());  // an empty /dev
}

TEST_F(DiscoveryTest, WithoutAVersionUsesTheDetectedOne) {
  absl::StatusOr<DriverFiles> files = DiscoverDriverFiles(*root_);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->driver_version, "535.104.05");
  EXPECT_THAT(ContainerPaths(files->libraries),
              ElementsAre(std::string(kLibDir) + "/libnvidia-ml.so.535.104.05"));
  EXPECT_THAT(ContainerPaths(files->firmware),
              ElementsAre("/lib/firmware/nvidia/535.104.05/gsp_ga10x.bin"));
}

TEST(Discovery, EmptyRootHasNoVersion) {
  FakeRoot fake;
  absl::StatusOr<std::unique_ptr<DriverRoot>> root = DriverRoot::Create({.root = fake.path()});
  ASSERT_TRUE(root.ok());
  absl::StatusOr<DriverFiles> files = DiscoverDriverFiles(**root);
  ASSERT_FALSE(files.ok());
  EXPECT_TRUE(absl::IsNotFound(files.status()));
  EXPECT_THAT(
      std::string(files.status().message()),
      HasSubstr("no libnvidia-ml.so.<version> in the library directories under " + fake.path()));
  // With a version given, an empty root is simply empty.
  absl::StatusOr<DriverFiles> empty = DiscoverDriverFiles(**root, kVersion);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(empty->libraries, IsEmpty());
  EXPECT_THAT(empty->binaries, IsEmpty());
  EXPECT_EQ(empty->libcuda_dir, "");
}

TEST(Discovery, SocketFallsBackToVarRunAndIgnoresDirectories) {
  FakeRoot fake;
  fake.Dir("/run/nvidia-persistenced/socket");  // a directory is not a socket
  fake.Socket("/var/run/nvidia-persistenced/socket");
  fake.Socket("/var/run/nvidia-fabricmanager/socket");
  fake.File("/tmp/nvidia-mps");  // a file is not the MPS directory
  absl::StatusOr<std::unique_ptr<DriverRoot>> root = DriverRoot::Create({.root = fake.path()});
  ASSERT_TRUE(root.ok());
  absl::StatusOr<DriverFiles> files = DiscoverDriverFiles(**root, kVersion);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(ContainerPaths(files->ipc), ElementsAre("/var/run/nvidia-persistenced/socket",
                                                      "/var/run/nvidia-fabricmanager/socket"));
}

TEST(Discovery, ControlDevicesWhenRoot) {
  if (!CanMknod()) GTEST_SKIP() << "needs permission to mknod";
  FakeRoot fake;
  ASSERT_TRUE(fake.CharDevice("/dev/nvidiactl", 195, 255));
  ASSERT_TRUE(fake.CharDevice("/dev/nvidia-uvm", 511, 0));
  absl::StatusOr<std::unique_ptr<DriverRoot>> root = DriverRoot::Create({.root = fake.path()});
  ASSERT_TRUE(root.ok());
  absl::StatusOr<DriverFiles> files = DiscoverDriverFiles(**root, kVersion);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->control_devices.size(), 2u);
  EXPECT_EQ(files->control_devices[1].path, "/dev/nvidia-uvm");
  EXPECT_EQ(files->control_devices[1].host_path, fake.Abs("/dev/nvidia-uvm"));
  EXPECT_EQ(files->control_devices[1].major, 511);
}

}  // namespace
}  // namespace dra::driverroot
