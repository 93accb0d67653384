// make-driver-root.sh: the layout it creates, device node types and numbers, idempotence, state
// handling, the fabric patches (--clique-id, --cluster-uuid), the IMEX fakes (--imex,
// --imex-ctl), the fake Fabric Manager (--fm-partitions) and errors.

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/mock-nvml/caps_minors.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every path under `root` with its type, mode and device numbers (not times or contents).
std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    struct stat st;
    if (::lstat(entry.path().c_str(), &st) != 0) continue;  // vanished meanwhile
    std::string what = std::to_string(st.st_mode);
    if (S_ISCHR(st.st_mode)) {
      what += " " + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    }
    if (S_ISLNK(st.st_mode)) what += " -> " + fs::read_symlink(entry.path()).string();
    if (S_ISREG(st.st_mode) && entry.path().string().find("/proc/") != std::string::npos) {
      what += " " + Read(entry.path());
    }
    out[entry.path().string().substr(root.size())] = what;
  }
  return out;
}

void ExpectCharDevice(const std::string& path, unsigned int major_number,
                      unsigned int minor_number) {
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
  if (::geteuid() != 0) {
    EXPECT_TRUE(S_ISREG(st.st_mode)) << path;  // placeholders without privileges
    return;
  }
  ASSERT_TRUE(S_ISCHR(st.st_mode)) << path;
  EXPECT_EQ(major(st.st_rdev), major_number) << path;
  EXPECT_EQ(minor(st.st_rdev), minor_number) << path;
}

TEST(MakeDriverRootTest, Layout) {
  dra::testing::TempDir dir;
  const std::string root = dir.path() + "/root";  // created by the script
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("a100-mig-4x", root).ok());
  const std::string lib = root + "/usr/lib/x86_64-linux-gnu";
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(lib + "/libnvidia-ml.so.580.126.20")));
  EXPECT_EQ(fs::read_symlink(lib + "/libnvidia-ml.so.1"), "libnvidia-ml.so.580.126.20");
  EXPECT_FALSE(fs::exists(lib + "/libnvidia-ml.so"));
  EXPECT_EQ(::access((root + "/usr/bin/nvidia-smi").c_str(), X_OK), 0);
  EXPECT_EQ(Read(root + "/var/lib/mock-nvml/profile.json"),
            Read(dra::testing::ProfilePath("a100-mig-4x")));
  EXPECT_TRUE(fs::exists(root + "/var/lib/mock-nvml/state.json"));

  ExpectCharDevice(root + "/dev/nvidiactl", 195, 255);
  ExpectCharDevice(root + "/dev/nvidia-modeset", 195, 254);
  ExpectCharDevice(root + "/dev/nvidia-uvm", mock_nvml::kNvidiaUvmMajor, 0);
  ExpectCharDevice(root + "/dev/nvidia-uvm-tools", mock_nvml::kNvidiaUvmMajor, 1);
  for (unsigned int minor_number = 0; minor_number < 4; ++minor_number) {
    ExpectCharDevice(root + "/dev/nvidia" + std::to_string(minor_number), 195, minor_number);
  }
  EXPECT_FALSE(fs::exists(root + "/dev/nvidia4"));
  ExpectCharDevice(root + "/dev/nvidia-caps/nvidia-cap1", mock_nvml::kNvidiaCapsMajor, 1);
  // GPU 0's first GI (id 1) and its CI 0.
  const unsigned int gi_minor = mock_nvml::GiAccessMinor(0, 1);
  ExpectCharDevice(root + "/dev/nvidia-caps/nvidia-cap" + std::to_string(gi_minor),
                   mock_nvml::kNvidiaCapsMajor, gi_minor);
  EXPECT_EQ(Read(root + "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/access"),
            "DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  EXPECT_EQ(Read(root + "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access"),
            "DeviceFileMinor: 13\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  EXPECT_THAT(Read(root + "/proc/driver/nvidia/capabilities/mig/config"),
              HasSubstr("DeviceFileMinor: 1\n"));
  EXPECT_THAT(Read(root + "/proc/driver/nvidia-caps/mig-minors"),
              HasSubstr("gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"));
  EXPECT_THAT(Read(root + "/proc/devices"), HasSubstr("\n508 nvidia-caps\n"));
  EXPECT_THAT(Read(root + "/proc/devices"), HasSubstr("\n510 nvidia-uvm\n"));
  const std::string info = Read(root + "/proc/driver/nvidia/gpus/0000:07:00.0/information");
  EXPECT_THAT(info, HasSubstr("Model: \t\t NVIDIA A100-SXM4-40GB\n"));
  EXPECT_THAT(info, HasSubstr("Device Minor: \t 0\n"));
  EXPECT_THAT(info, HasSubstr("Bus Location: \t 0000:07:00.0\n"));
}

TEST(MakeDriverRootTest, NoMigFilesWithoutMig) {
  dra::testing::TempDir dir;
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("t4-2x", dir.path()).ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/dev/nvidia-caps"));
  EXPECT_FALSE(fs::exists(dir.path() + "/proc/driver/nvidia/capabilities"));
  EXPECT_TRUE(fs::exists(dir.path() + "/proc/driver/nvidia/gpus/0000:00:05.0/information"));
}

TEST(MakeDriverRootTest, IdempotentAndKeepsStateUnlessReset) {
  dra::testing::TempDir dir;
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", dir.path()).ok());
  const auto first = Snapshot(dir.path());
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", dir.path(), /*reset_state=*/false).ok());
  EXPECT_EQ(Snapshot(dir.path()), first);

  // A setting changed through NVML survives a re-run and goes away with --reset-state.
  auto set = dra::testing::RunCommand({dir.path() + "/usr/bin/nvidia-smi", "-i", "0", "-c", "3"});
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->exit_code, 0) << set->output;
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", dir.path(), /*reset_state=*/false).ok());
  EXPECT_THAT(Read(dir.path() + "/var/lib/mock-nvml/state.json"), HasSubstr("\"compute_mode\": 3"));
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", dir.path(), /*reset_state=*/true).ok());
  EXPECT_THAT(Read(dir.path() + "/var/lib/mock-nvml/state.json"),
              ::testing::Not(HasSubstr("\"compute_mode\": 3")));
}

// What a container gets through the plugin's CDI spec: the driver's files at their standard
// paths (libnvidia-ml.so.1 as a plain file, nvidia-smi) and the injected device nodes, but not
// <root>/var/lib/mock-nvml. The mock then reads the profile appended to the library itself, and
// nvidia-smi lists exactly the GPUs whose /dev/nvidia<minor> is there.
TEST(MakeDriverRootTest, ContainerViewUsesTheProfileEmbeddedInTheLibrary) {
  dra::testing::TempDir dir;
  const std::string root = dir.path() + "/root", ctr = dir.path() + "/ctr";
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", root).ok());
  fs::create_directories(ctr + "/usr/lib/x86_64-linux-gnu");
  fs::create_directories(ctr + "/usr/bin");
  fs::create_directories(ctr + "/dev");
  fs::copy_file(root + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                ctr + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
  fs::copy_file(root + "/usr/bin/nvidia-smi", ctr + "/usr/bin/nvidia-smi");
  std::ofstream(ctr + "/dev/nvidiactl").put('\n');
  std::ofstream(ctr + "/dev/nvidia3").put('\n');

  auto list = dra::testing::RunCommand({ctr + "/usr/bin/nvidia-smi", "-L"},
                                       {{"MOCK_NVML_ROOT", ""}, {"MOCK_NVIDIA_SMI_DEV_DIR", ""}});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->exit_code, 0) << list->output;
  EXPECT_THAT(list->output,
              ::testing::MatchesRegex("GPU 0: NVIDIA H100 80GB HBM3 \\(UUID: GPU-[^)]+\\)\n"));
  // The one listed is the GPU with minor 3, as on the host.
  auto host = dra::testing::RunCommand({root + "/usr/bin/nvidia-smi", "-q", "-i", "3"});
  ASSERT_TRUE(host.ok());
  const std::string uuid = list->output.substr(list->output.find("GPU-"), 40);
  EXPECT_THAT(host->output, HasSubstr(uuid));

  // A library without the appended profile (as built) finds none: no driver.
  fs::copy_file(dra::testing::MockNvmlLibraryPath(),
                ctr + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                fs::copy_options::overwrite_existing);
  auto none = dra::testing::RunCommand({ctr + "/usr/bin/nvidia-smi", "-L"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->exit_code, 9) << none->output;
}

TEST(MakeDriverRootTest, ProfileByPathAndErrors) {
  dra::testing::TempDir dir;
  EXPECT_TRUE(
      dra::testing::MakeMockDriverRoot(dra::testing::ProfilePath("gb200-4x"), dir.path()).ok());
  absl::Status missing = dra::testing::MakeMockDriverRoot("no-such-profile", dir.path());
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.message()), HasSubstr("no profile no-such-profile"));
  auto usage = dra::testing::RunCommand({dra::testing::MakeDriverRootScript(), "t4-2x"});
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->exit_code, 1);
  EXPECT_THAT(usage->output, HasSubstr("usage: make-driver-root.sh"));
}

// The script run directly, with this build's doubles and `extra` options before the operands.
absl::StatusOr<dra::testing::CommandResult> RunScript(const std::vector<std::string>& extra,
                                                      const std::string& profile,
                                                      const std::string& dir) {
  std::vector<std::string> argv = {dra::testing::MakeDriverRootScript(), "--lib",
                                   dra::testing::MockNvmlLibraryPath(), "--smi",
                                   dra::testing::FakeNvidiaSmiPath()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(profile);
  argv.push_back(dir);
  return dra::testing::RunCommand(argv);
}

// Two nodes of one cluster in different cliques: every GPU's fabric info carries the patched
// values (as NVML reports them, through nvidia-smi -q), the IMEX fakes are installed, and the
// IMEX management capability is there.
TEST(MakeDriverRootTest, FabricPatchesAndImexBinaries) {
  dra::testing::TempDir dir;
  const std::string root = dir.path() + "/root";
  const std::string imex = dir.path() + "/imex", ctl = dir.path() + "/imex-ctl";
  std::ofstream(imex) << "#!/bin/sh\necho imex\n";
  std::ofstream(ctl) << "#!/bin/sh\necho READY\n";
  auto made = RunScript({"--clique-id", "0042", "--cluster-uuid",
                         "AAAAAAAA-1111-2222-3333-444444444444", "--imex", imex, "--imex-ctl", ctl},
                        "gb200-4x", root);
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->exit_code, 0) << made->output;
  const std::string installed = Read(root + "/var/lib/mock-nvml/profile.json");
  EXPECT_THAT(installed, HasSubstr("\"clique_id\": 42"));
  EXPECT_THAT(installed, HasSubstr("\"cluster_uuid\": \"aaaaaaaa-1111-2222-3333-444444444444\""));
  EXPECT_THAT(installed, ::testing::Not(HasSubstr("\"clique_id\": 7")));
  EXPECT_EQ(::access((root + "/usr/bin/nvidia-imex").c_str(), X_OK), 0);
  EXPECT_EQ(Read(root + "/usr/bin/nvidia-imex-ctl"), "#!/bin/sh\necho READY\n");
  EXPECT_EQ(Read(root + "/proc/driver/nvidia/capabilities/fabric-imex-mgmt"),
            "DeviceFileMinor: 0\nDeviceFileMode: 256\nDeviceFileModify: 1\n");
  ExpectCharDevice(root + "/dev/nvidia-caps/nvidia-cap0", mock_nvml::kNvidiaCapsMajor,
                   mock_nvml::kCapsFabricImexMgmtMinor);
  EXPECT_THAT(Read(root + "/proc/devices"), HasSubstr(" nvidia-caps-imex-channels\n"));

  // Without the options the profile's own values come back (a different profile: state reset).
  made = RunScript({"--imex", imex, "--imex-ctl", ctl}, "gb200-4x", root);
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->exit_code, 0) << made->output;
  EXPECT_EQ(Read(root + "/var/lib/mock-nvml/profile.json"),
            Read(dra::testing::ProfilePath("gb200-4x")));
}

TEST(MakeDriverRootTest, FabricPatchErrors) {
  dra::testing::TempDir dir;
  auto no_fabric = RunScript({"--clique-id", "3"}, "t4-2x", dir.path());
  ASSERT_TRUE(no_fabric.ok());
  EXPECT_EQ(no_fabric->exit_code, 1);
  EXPECT_THAT(no_fabric->output, HasSubstr("has no fabric info to patch"));
  auto bad_id = RunScript({"--clique-id", "seven"}, "gb200-4x", dir.path());
  ASSERT_TRUE(bad_id.ok());
  EXPECT_EQ(bad_id->exit_code, 1);
  EXPECT_THAT(bad_id->output, HasSubstr("--clique-id seven: want a decimal number"));
  auto too_big = RunScript({"--clique-id", "4294967296"}, "gb200-4x", dir.path());
  ASSERT_TRUE(too_big.ok());
  EXPECT_EQ(too_big->exit_code, 1);
  auto bad_uuid = RunScript({"--cluster-uuid", "not-a-uuid"}, "gb200-4x", dir.path());
  ASSERT_TRUE(bad_uuid.ok());
  EXPECT_EQ(bad_uuid->exit_code, 1);
  EXPECT_THAT(bad_uuid->output, HasSubstr("--cluster-uuid not-a-uuid: want a UUID"));
  auto missing = RunScript({"--imex", dir.path() + "/nope"}, "gb200-4x", dir.path());
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 1);
  EXPECT_THAT(missing->output, HasSubstr("no fake nvidia-imex at"));
}

// --fm-partitions: the fake libnvfm beside the mock NVML, its partitions, the NVSwitch entry; the
// active partitions survive a rerun with the same list and are forgotten when it changes.
TEST(MakeDriverRootTest, FabricManagerPartitions) {
  dra::testing::TempDir tmp;
  const std::string root = tmp.path() + "/root", parts = tmp.path() + "/parts.json";
  std::ofstream(parts) << R"({"partitions": [{"id": 3, "gpus": [1, 2]}]})";
  auto made = RunScript({"--fm-partitions", parts, "--nvfm", dra::testing::FakeNvfmLibraryPath()},
                        "h100-8x", root);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code, 0) << made->output;
  EXPECT_TRUE(fs::is_regular_file(root + "/usr/lib/x86_64-linux-gnu/libnvfm.so.1"));
  EXPECT_EQ(Read(root + "/var/lib/mock-nvfm/partitions.json"), Read(parts));
  EXPECT_TRUE(fs::exists(root + "/proc/driver/nvidia-nvswitch/devices/0000:05:00.0"));
  std::ofstream(root + "/var/lib/mock-nvfm/state.json") << R"({"active": [3]})";
  made = RunScript({"--fm-partitions", parts, "--nvfm", dra::testing::FakeNvfmLibraryPath()},
                   "h100-8x", root);
  ASSERT_EQ(made->exit_code, 0) << made->output;
  EXPECT_TRUE(fs::exists(root + "/var/lib/mock-nvfm/state.json"));
  std::ofstream(parts) << R"({"partitions": [{"id": 4, "gpus": [3, 4]}]})";
  made = RunScript({"--fm-partitions", parts, "--nvfm", dra::testing::FakeNvfmLibraryPath()},
                   "h100-8x", root);
  ASSERT_EQ(made->exit_code, 0) << made->output;
  EXPECT_FALSE(fs::exists(root + "/var/lib/mock-nvfm/state.json"));
  EXPECT_THAT(Read(root + "/var/lib/mock-nvfm/partitions.json"), HasSubstr("\"id\": 4"));
  auto missing = RunScript({"--fm-partitions", tmp.path() + "/none.json"}, "h100-8x", root);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 1);
  EXPECT_THAT(missing->output, HasSubstr("--fm-partitions: no file"));
}

}  // namespace
