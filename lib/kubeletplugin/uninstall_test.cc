// RemoveDriverFiles (uninstall.h): what a plugin removes from its node after an uninstall.

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

}  // namespace
}  // namespace dra::kubeletplugin
