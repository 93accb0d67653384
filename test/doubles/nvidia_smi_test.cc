// The fake nvidia-smi as a program: -L format and device-node visibility, -q, the settings the
// product changes (-c, compute-policy --set-timeslice, -pm), exit codes, and the LD_PRELOAD way
// the product runs it.

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

class NvidiaSmiTest : public ::testing::Test {
 protected:
  void Make(const std::string& profile) {
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot(profile, dir_.path()).ok());
  }
  dra::testing::CommandResult Smi(std::vector<std::string> args,
                                  const std::map<std::string, std::string>& env = {}) {
    args.insert(args.begin(), dir_.path() + "/usr/bin/nvidia-smi");
    absl::StatusOr<dra::testing::CommandResult> result = dra::testing::RunCommand(args, env);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : dra::testing::CommandResult{};
  }
  std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    std::stringstream s(text);
    for (std::string line; std::getline(s, line);) lines.push_back(line);
    return lines;
  }

  dra::testing::TempDir dir_;
};

TEST_F(NvidiaSmiTest, ListsGpusInTheRealFormat) {
  Make("h100-8x");
  const auto result = Smi({"-L"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::vector<std::string> lines = Lines(result.output);
  ASSERT_EQ(lines.size(), 8u);
  const std::regex gpu_line(
      R"(GPU [0-7]: NVIDIA H100 80GB HBM3 \(UUID: GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\))");
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_TRUE(std::regex_match(lines[i], gpu_line)) << lines[i];
    EXPECT_EQ(lines[i].rfind("GPU " + std::to_string(i) + ":", 0), 0u) << lines[i];
  }
}

TEST_F(NvidiaSmiTest, ListsMigDevicesIndented) {
  Make("a100-mig-4x");
  const auto result = Smi({"-L"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::vector<std::string> lines = Lines(result.output);
  ASSERT_EQ(lines.size(), 4u + 4 + 4 + 1);
  EXPECT_THAT(lines[0], ::testing::StartsWith("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-"));
  // The profile name is padded so that "Device" starts in column 18, as nvidia-smi prints it.
  const std::regex mig_line(R"(  MIG [0-9a-z.+]+ +Device +[0-3]: \(UUID: MIG-[0-9a-f-]{36}\))");
  for (int i = 1; i <= 4; ++i) {
    EXPECT_TRUE(std::regex_match(lines[i], mig_line)) << lines[i];
    EXPECT_EQ(lines[i].substr(18, 7), "Device ") << lines[i];
  }
  EXPECT_THAT(lines[1], ::testing::StartsWith("  MIG 1g.5gb      Device  0: (UUID: MIG-"));
  EXPECT_THAT(lines[4], ::testing::StartsWith("  MIG 3g.20gb     Device  3: (UUID: MIG-"));
}

TEST_F(NvidiaSmiTest, DeviceNodesDecideVisibility) {
  Make("t4-2x");
  const std::string before = Smi({"-L"}).output;
  const std::vector<std::string> all = Lines(before);
  ASSERT_EQ(all.size(), 2u);
  const std::string second_uuid = all[1].substr(all[1].find("GPU-"), 40);

  fs::rename(dir_.path() + "/dev/nvidia0", dir_.path() + "/nvidia0.hidden");
  const auto hidden = Smi({"-L"});
  ASSERT_EQ(hidden.exit_code, 0);
  ASSERT_EQ(Lines(hidden.output).size(), 1u);
  // The remaining GPU is renumbered from 0, as in a container that got only that node.
  EXPECT_THAT(hidden.output, ::testing::StartsWith("GPU 0: Tesla T4 (UUID: " + second_uuid));

  fs::rename(dir_.path() + "/nvidia0.hidden", dir_.path() + "/dev/nvidia0");
  EXPECT_EQ(Smi({"-L"}).output, before);
}

TEST_F(NvidiaSmiTest, CapabilityNodesDecideMigVisibility) {
  Make("a100-mig-4x");
  // GPU 2 has one 3g.20gb: GI id 1, CI 0 -> caps minors 3 + 2*135 + 9 = 282 and 283.
  ASSERT_THAT(Smi({"-L"}).output, HasSubstr("  MIG 3g.20gb     Device  0:"));
  fs::remove(dir_.path() + "/dev/nvidia-caps/nvidia-cap283");
  const std::vector<std::string> lines = Lines(Smi({"-L"}).output);
  EXPECT_EQ(lines.size(), 4u + 4 + 4);
  EXPECT_THAT(lines.back(), ::testing::StartsWith("GPU 3:"));
}

TEST_F(NvidiaSmiTest, DevDirOverride) {
  Make("t4-2x");
  dra::testing::TempDir empty;
  const auto none = Smi({"-L"}, {{"MOCK_NVIDIA_SMI_DEV_DIR", empty.path()}});
  EXPECT_EQ(none.exit_code, 6);
  EXPECT_EQ(none.output, "No devices were found\n");
  std::ofstream(empty.path() + "/nvidia1").close();  // a plain file counts, as for non-root
  const auto one = Smi({"-L"}, {{"MOCK_NVIDIA_SMI_DEV_DIR", empty.path()}});
  EXPECT_EQ(one.exit_code, 0);
  EXPECT_EQ(Lines(one.output).size(), 1u);
}

TEST_F(NvidiaSmiTest, ComputeModeAndTimesliceArePersisted) {
  Make("h100-8x");
  const std::string line = Lines(Smi({"-L"}).output)[3];
  const std::string uuid = line.substr(line.find("GPU-"), 40);
  auto set = Smi({"-i", uuid, "-c", "EXCLUSIVE_PROCESS"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_THAT(set.output,
              HasSubstr("Set compute mode to EXCLUSIVE_PROCESS for GPU 00000000:5D:00.0."));
  set = Smi({"compute-policy", "-i", uuid, "--set-timeslice", "2"});
  ASSERT_EQ(set.exit_code, 0) << set.output;

  const auto query = Smi({"-q", "-i", uuid});
  ASSERT_EQ(query.exit_code, 0) << query.output;
  EXPECT_THAT(query.output, ContainsRegex("Compute Mode +: Exclusive_Process"));
  EXPECT_THAT(query.output, ContainsRegex("Compute Timeslice +: Medium"));
  EXPECT_THAT(query.output, ContainsRegex("GPU UUID +: " + uuid));
  EXPECT_THAT(query.output, ContainsRegex("Product Architecture +: Hopper"));
  // Other GPUs are untouched; the state file records the values for tests to assert on.
  EXPECT_THAT(Smi({"-q", "-i", "0"}).output, ContainsRegex("Compute Mode +: Default"));
  std::ifstream state(dir_.path() + "/var/lib/mock-nvml/state.json");
  std::stringstream text;
  text << state.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"compute_mode\": 3"));
  EXPECT_THAT(text.str(), HasSubstr("\"timeslice\": 2"));

  // Reset the way unprepare does.
  ASSERT_EQ(Smi({"-i", uuid, "-c", "DEFAULT"}).exit_code, 0);
  ASSERT_EQ(Smi({"compute-policy", "-i", uuid, "--set-timeslice=0"}).exit_code, 0);
  const auto reset = Smi({"-q", "-i", uuid}).output;
  EXPECT_THAT(reset, ContainsRegex("Compute Mode +: Default"));
  EXPECT_THAT(reset, ContainsRegex("Compute Timeslice +: Default"));
}

// The product sets a MIG device's time-slice interval on its parent GPU
// (lib/gpuplugin/timeslicing/time_slicing.h): the fake takes compute-policy on a MIG-enabled GPU by
// the GPU's UUID, and, as for any id it does not know as a GPU, refuses a MIG device's UUID ("No
// devices were found", exit 6).
TEST_F(NvidiaSmiTest, TimesliceOnAMigEnabledGpuIsTheGpusSetting) {
  Make("a100-mig-4x");
  const std::string listing = Smi({"-L"}).output;
  std::smatch gpu, mig;
  ASSERT_TRUE(std::regex_search(listing, gpu, std::regex("GPU-[0-9a-f-]{36}"))) << listing;
  ASSERT_TRUE(std::regex_search(listing, mig, std::regex("MIG-[0-9a-f-]{36}"))) << listing;
  const auto set = Smi({"compute-policy", "-i", gpu.str(), "--set-timeslice", "3"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_THAT(Smi({"-q", "-i", gpu.str()}).output, ContainsRegex("Compute Timeslice +: Long"));
  EXPECT_THAT(Smi({"compute-policy", "-l"}).output, HasSubstr("GPU 0  Timeslice  Long"));
  const auto by_mig = Smi({"compute-policy", "-i", mig.str(), "--set-timeslice", "1"});
  EXPECT_EQ(by_mig.exit_code, 6) << by_mig.output;
  EXPECT_THAT(by_mig.output, HasSubstr("No devices were found"));
  EXPECT_THAT(Smi({"-q", "-i", gpu.str()}).output, ContainsRegex("Compute Timeslice +: Long"));
}

TEST_F(NvidiaSmiTest, PersistenceMode) {
  Make("t4-2x");
  EXPECT_THAT(Smi({"-q", "-i", "1"}).output, ContainsRegex("Persistence Mode +: Disabled"));
  const auto set = Smi({"-i", "1", "-pm", "1"});
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_THAT(set.output, HasSubstr("Enabled persistence mode for GPU 00000000:00:05.0."));
  EXPECT_THAT(Smi({"-q", "-i", "00:05.0"}).output, ContainsRegex("Persistence Mode +: Enabled"));
}

TEST_F(NvidiaSmiTest, ExitCodes) {
  Make("t4-2x");
  EXPECT_EQ(Smi({"-i", "7", "-q"}).exit_code, 6);
  EXPECT_EQ(Smi({"-i", "GPU-nope", "-c", "DEFAULT"}).exit_code, 6);
  EXPECT_EQ(Smi({"--frobnicate"}).exit_code, 2);
  EXPECT_EQ(Smi({"compute-policy", "--set-timeslice", "5"}).exit_code, 2);
  EXPECT_EQ(Smi({"-c", "EXCLUSIVE_THREAD"}).exit_code, 3);  // NVML: not supported
  EXPECT_EQ(Smi({"-h"}).exit_code, 0);
  fs::remove(dir_.path() + "/dev/nvidiactl");
  const auto no_driver = Smi({"-L"});
  EXPECT_EQ(no_driver.exit_code, 9);
  EXPECT_THAT(no_driver.output, HasSubstr("couldn't communicate with the NVIDIA driver"));
}

TEST_F(NvidiaSmiTest, Version) {
  Make("gb200-4x");
  const auto result = Smi({"--version"});
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("DRIVER version      : 580.126.20\n"));
  EXPECT_THAT(result.output, HasSubstr("CUDA Version        : 13.0\n"));
}

TEST_F(NvidiaSmiTest, RunsWithThePreloadedLibrary) {
  // How the product runs it (docs/sharing.md "What the plugin runs"): some nvidia-smi with
  // LD_PRELOAD=<libnvidia-ml.so.1>.
  Make("gb200-4x");
  const std::string lib = dir_.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1";
  auto result = dra::testing::RunCommand(
      {dra::testing::FakeNvidiaSmiPath(), "-L"},
      {{"LD_PRELOAD", lib}, {"MOCK_NVIDIA_SMI_DEV_DIR", dir_.path() + "/dev"}});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 0) << result->output;
  EXPECT_EQ(Lines(result->output).size(), 4u);
  EXPECT_THAT(result->output, HasSubstr("NVIDIA GB200"));
}

}  // namespace
