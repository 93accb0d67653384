// RemoveDriverFiles and RemoveFilesAfterUninstall (uninstall.h): what a plugin removes from its
// node after an uninstall.

#include "lib/kubeletplugin/uninstall.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/kubeletplugin/test_util.h"

namespace dra::kubeletplugin {
namespace {

namespace fs = std::filesystem;
using ::dra::kubeletplugin::testing::TempTree;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

void Touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << "x";
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RemoveDriverFilesTest, RemovesTheDriversSpecsAndPluginDirectoryAndNothingElse) {
  TempTree tree;
  const std::string cdi = tree.root() + "/cdi";
  const std::string dir = tree.plugins() + "/compute-domain.nvidia.com";
  Touch(cdi + "/k8s.compute-domain.nvidia.com-device_base.json");
  Touch(cdi + "/k8s.compute-domain.nvidia.com-claim_1234.json");
  Touch(cdi + "/k8s.gpu.nvidia.com-claim_5678.json");  // the other driver's
  Touch(cdi + "/nvidia.yaml");                         // someone else's
  Touch(dir + "/checkpoint.json");
  Touch(dir + "/domains/cd-uid/imexd.cfg.tmpl");
  fs::create_symlink("/etc", dir + "/link");  // removed, not followed
  Touch(tree.plugins() + "/gpu.nvidia.com/checkpoint.json");

  EXPECT_THAT(
      RemoveDriverFiles(
          {.cdi_root = cdi, .cdi_prefixes = {"k8s.compute-domain.nvidia.com-"}, .plugin_dir = dir}),
      IsEmpty());
  EXPECT_THAT(Names(cdi), ElementsAre("k8s.gpu.nvidia.com-claim_5678.json", "nvidia.yaml"));
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(fs::exists("/etc"));
  EXPECT_THAT(Names(tree.plugins()), ElementsAre("gpu.nvidia.com"));
}

TEST(RemoveDriverFilesTest, NothingThereIsNothingLeft) {
  TempTree tree;
  EXPECT_THAT(RemoveDriverFiles({.cdi_root = tree.root() + "/no-cdi",
                                 .cdi_prefixes = {"k8s.gpu.nvidia.com-"},
                                 .plugin_dir = tree.plugins() + "/gpu.nvidia.com"}),
              IsEmpty());
}

// A checkpoint in the plugin directory with one claim, "ns/c1" (uid-1).
std::unique_ptr<checkpoint::Checkpoint> CheckpointWithOneClaim(const TempTree& tree,
                                                               const std::string& dir) {
  const std::string boot_id = tree.root() + "/boot_id";
  std::ofstream(boot_id) << "boot-1\n";
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> cp =
      checkpoint::Checkpoint::Open(dir, boot_id);
  EXPECT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE((*cp)
                  ->Update([](checkpoint::ClaimMap& claims) {
                    claims["uid-1"] = {.namespace_name = "ns", .name = "c1"};
                    return absl::OkStatus();
                  })
                  .ok());
  return std::move(*cp);
}

TEST(RemoveFilesAfterUninstallTest, AClaimStillPreparedKeepsEverything) {
  TempTree tree;
  const std::string cdi = tree.root() + "/cdi";
  const std::string dir = tree.plugins() + "/gpu.nvidia.com";
  Touch(cdi + "/k8s.gpu.nvidia.com-claim_uid-1.json");
  std::unique_ptr<checkpoint::Checkpoint> cp = CheckpointWithOneClaim(tree, dir);

  RemoveFilesAfterUninstall(
      cp.get(), {.cdi_root = cdi, .cdi_prefixes = {"k8s.gpu.nvidia.com-"}, .plugin_dir = dir},
      [](const checkpoint::PreparedClaim&) { return true; });
  EXPECT_THAT(Names(cdi), ElementsAre("k8s.gpu.nvidia.com-claim_uid-1.json"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint.json"));
}

TEST(RemoveFilesAfterUninstallTest, RecordsThatHoldNothingDoNotKeepTheFiles) {
  TempTree tree;
  const std::string cdi = tree.root() + "/cdi";
  const std::string dir = tree.plugins() + "/compute-domain.nvidia.com";
  Touch(cdi + "/k8s.compute-domain.nvidia.com-device_base.json");
  std::unique_ptr<checkpoint::Checkpoint> cp = CheckpointWithOneClaim(tree, dir);

  RemoveFilesAfterUninstall(
      cp.get(),
      {.cdi_root = cdi, .cdi_prefixes = {"k8s.compute-domain.nvidia.com-"}, .plugin_dir = dir},
      [](const checkpoint::PreparedClaim& c) { return c.name != "c1"; });
  EXPECT_THAT(Names(cdi), IsEmpty());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(RemoveFilesAfterUninstallTest, WithoutACheckpointTheFilesGo) {
  TempTree tree;
  const std::string cdi = tree.root() + "/cdi";
  const std::string dir = tree.plugins() + "/gpu.nvidia.com";
  Touch(cdi + "/k8s.gpu.nvidia.com-claim_uid-1.json");
  Touch(dir + "/plugin.sock");
  RemoveFilesAfterUninstall(
      nullptr, {.cdi_root = cdi, .cdi_prefixes = {"k8s.gpu.nvidia.com-"}, .plugin_dir = dir},
      [](const checkpoint::PreparedClaim&) { return true; });
  EXPECT_THAT(Names(cdi), IsEmpty());
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace dra::kubeletplugin
