// The FM loader against the fake libnvfm.so.1 (test/doubles/fake-nvfm), installed into a temp
// driver root as a real driver would have it, and the pure helpers (validation, matching,
// detection, connect options).

#include "lib/fabricmanager/fabric_manager.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::fm {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr char kPartitions[] = R"({"partitions": [
  {"id": 0, "gpus": [1, 2, 3, 4]},
  {"id": 1, "gpus": [1, 2]},
  {"id": 2, "gpus": [3, 4]},
  {"id": 3, "gpus": [1]}
]})";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class NvfmLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::InstallFakeFabricManager(root_, kPartitions).ok());
  }
  std::unique_ptr<NvfmLibrary> Open() {
    auto fm = NvfmLibrary::Open(root_, {.address = "/run/fm.sock", .unix_socket = true});
    EXPECT_TRUE(fm.ok()) << fm.status();
    return fm.ok() ? *std::move(fm) : nullptr;
  }
  std::string Calls() { return ReadAll(root_ + "/var/lib/mock-nvfm/calls.log"); }

  dra::testing::TempDir tmp_;
  std::string root_;
};

TEST_F(NvfmLibraryTest, ListsThePartitionsOfTheDriverRoot) {
  auto fm = Open();
  ASSERT_NE(fm, nullptr);
  EXPECT_THAT(fm->library_path(), HasSubstr("/usr/lib/x86_64-linux-gnu/libnvfm.so.1"));
  auto parts = fm->Partitions();
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 4u);
  EXPECT_EQ((*parts)[0], (Partition{.id = 0, .active = false, .module_ids = {1, 2, 3, 4}}));
  EXPECT_EQ((*parts)[3], (Partition{.id = 3, .active = false, .module_ids = {1}}));
  EXPECT_TRUE(ValidatePartitions(*parts).ok());
  EXPECT_THAT(Calls(), HasSubstr("fmConnect unix:/run/fm.sock"));
}

TEST_F(NvfmLibraryTest, ActivateIsIdempotentAndPersistsAcrossReopen) {
  {
    auto fm = Open();
    ASSERT_NE(fm, nullptr);
    ASSERT_TRUE(fm->Activate(1).ok());
    ASSERT_TRUE(fm->Activate(1).ok());  // already active: no second activation
  }
  auto fm = Open();  // a restarted plugin
  ASSERT_NE(fm, nullptr);
  auto parts = fm->Partitions();
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_TRUE((*parts)[1].active);
  EXPECT_FALSE((*parts)[0].active);
  // A partition sharing a GPU with the active one: FM refuses.
  absl::Status s = fm->Activate(0);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("fmActivateFabricPartition: FM_ST_IN_USE (-7)"));
  EXPECT_TRUE(fm->Activate(2).ok());  // disjoint
  ASSERT_TRUE(fm->Deactivate(1).ok());
  ASSERT_TRUE(fm->Deactivate(1).ok());  // already inactive
  EXPECT_TRUE(absl::IsNotFound(fm->Activate(9)));
  int activations = 0, deactivations = 0;
  for (size_t pos = 0; (pos = Calls().find("fmActivateFabricPartition ", pos)) != std::string::npos;
       ++pos) {
    ++activations;
  }
  for (size_t pos = 0;
       (pos = Calls().find("fmDeactivateFabricPartition ", pos)) != std::string::npos; ++pos) {
    ++deactivations;
  }
  EXPECT_EQ(activations, 2);  // 1 once, 2 once
  EXPECT_EQ(deactivations, 1);
}

TEST_F(NvfmLibraryTest, InjectedFailureIsReportedOnceThenClears) {
  ASSERT_TRUE(WriteFileAtomically(root_ + "/var/lib/mock-nvfm/inject.json",
                                  R"({"fmActivateFabricPartition": {"code": -10, "times": 1}})")
                  .ok());
  auto fm = Open();
  ASSERT_NE(fm, nullptr);
  absl::Status s = fm->Activate(3);
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("FM_ST_NVLINK_ERROR"));
  EXPECT_FALSE((*fm->Partitions())[3].active);
  EXPECT_TRUE(fm->Activate(3).ok());
  EXPECT_TRUE((*fm->Partitions())[3].active);
}

TEST_F(NvfmLibraryTest, ConnectFailureNamesTheAddress) {
  ASSERT_TRUE(WriteFileAtomically(root_ + "/var/lib/mock-nvfm/inject.json",
                                  R"({"fmConnect": {"code": -9}})")
                  .ok());
  auto fm = Open();
  ASSERT_NE(fm, nullptr);
  auto parts = fm->Partitions();
  EXPECT_TRUE(absl::IsUnavailable(parts.status())) << parts.status();
  EXPECT_THAT(parts.status().message(), HasSubstr("/run/fm.sock"));
}

TEST(NvfmLibraryOpenTest, MissingLibraryNamesTheSearchedPaths) {
  dra::testing::TempDir tmp;
  auto fm = NvfmLibrary::Open(tmp.path(), {});
  EXPECT_TRUE(absl::IsNotFound(fm.status())) << fm.status();
  EXPECT_THAT(fm.status().message(), HasSubstr("libnvfm.so not found under driver root"));
  EXPECT_THAT(fm.status().message(), HasSubstr(tmp.path() + "/usr/lib64/libnvfm.so.1"));
}

TEST(FabricPartitionsTest, ValidateRefusesWhatFmShouldNeverReport) {
  EXPECT_THAT(
      ValidatePartitions({{.id = 1, .module_ids = {1}}, {.id = 1, .module_ids = {2}}}).message(),
      HasSubstr("partition 1 twice"));
  EXPECT_THAT(ValidatePartitions({{.id = 4, .module_ids = {}}}).message(),
              HasSubstr("partition 4 without GPUs"));
  EXPECT_THAT(ValidatePartitions({{.id = 2, .module_ids = {3, 3}}}).message(),
              HasSubstr("GPU module 3 twice in partition 2"));
}

TEST(FabricPartitionsTest, FindExactPartitionMatchesSetsOnly) {
  const std::vector<Partition> parts = {{.id = 0, .module_ids = {1, 2, 3, 4}},
                                        {.id = 1, .module_ids = {2, 1}},
                                        {.id = 2, .module_ids = {3}}};
  ASSERT_NE(FindExactPartition(parts, {1, 2}), nullptr);
  EXPECT_EQ(FindExactPartition(parts, {1, 2})->id, 1u);
  EXPECT_EQ(FindExactPartition(parts, {4, 3, 2, 1})->id, 0u);
  EXPECT_EQ(FindExactPartition(parts, {1, 2, 3}), nullptr);  // a subset of 0 is no match
  EXPECT_EQ(FindExactPartition(parts, {5}), nullptr);
}

TEST(FabricDetectionTest, NvswitchDevicesOrSwitchManagedVpd) {
  dra::testing::TempDir tmp;
  const std::string& host = tmp.path();
  EXPECT_FALSE(HasFabricManagerFabric(host));
  fs::create_directories(host + "/proc/driver/nvidia-nvswitch/devices");
  EXPECT_FALSE(HasFabricManagerFabric(host));  // empty
  fs::create_directories(host + "/sys/class/infiniband/mlx5_0/device");
  ASSERT_TRUE(
      WriteFileAtomically(host + "/sys/class/infiniband/mlx5_0/device/vpd", "PN MCX75").ok());
  EXPECT_FALSE(HasFabricManagerFabric(host));
  fs::create_directories(host + "/sys/class/infiniband/mlx5_1/device");
  ASSERT_TRUE(WriteFileAtomically(host + "/sys/class/infiniband/mlx5_1/device/vpd",
                                  std::string("V0\0SW_MNG\0", 10))
                  .ok());
  EXPECT_TRUE(HasFabricManagerFabric(host));
  fs::remove_all(host + "/sys");
  ASSERT_TRUE(
      WriteFileAtomically(host + "/proc/driver/nvidia-nvswitch/devices/0000:05:00.0", "").ok());
  EXPECT_TRUE(HasFabricManagerFabric(host));
}

TEST(ConnectOptionsTest, FromEnvironmentAsTheGoDriver) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  ConnectOptions o = ConnectOptionsFromEnv(get);
  EXPECT_TRUE(o.unix_socket);
  EXPECT_EQ(o.address, kDefaultFmSocket);
  env["NVIDIA_FABRICMANAGER_UNIX_SOCKET"] = "/run/fm/socket";
  EXPECT_EQ(ConnectOptionsFromEnv(get).address, "/run/fm/socket");
  env["NVIDIA_FABRICMANAGER_ADDRESS"] = "";
  o = ConnectOptionsFromEnv(get);
  EXPECT_FALSE(o.unix_socket);
  EXPECT_EQ(o.address, "127.0.0.1");
  env["NVIDIA_FABRICMANAGER_ADDRESS"] = "10.0.0.5:6666";
  EXPECT_EQ(ConnectOptionsFromEnv(get).address, "10.0.0.5:6666");
}

TEST(LibrarySearchPathsTest, BothNamesInEachNvmlDirectory) {
  const std::vector<std::string> paths = LibrarySearchPaths("/driver-root/");
  ASSERT_EQ(paths.size(), 14u);
  EXPECT_EQ(paths[0], "/driver-root/libnvfm.so");
  EXPECT_EQ(paths[1], "/driver-root/libnvfm.so.1");
  EXPECT_EQ(paths[4], "/driver-root/usr/lib/x86_64-linux-gnu/libnvfm.so");
  EXPECT_EQ(LibrarySearchPaths("/")[0], "/libnvfm.so");
}

}  // namespace
}  // namespace dra::fm
