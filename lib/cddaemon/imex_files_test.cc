#include "lib/cddaemon/imex_files.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"

namespace dra::cddaemon {
namespace {

using ::testing::HasSubstr;

TEST(DnsNameTest, FourDigitsZeroPadded) {
  EXPECT_EQ(DnsName(0), "compute-domain-daemon-0000");
  EXPECT_EQ(DnsName(17), "compute-domain-daemon-0017");
  EXPECT_EQ(DnsName(1234), "compute-domain-daemon-1234");
}

TEST(RenderImexConfigTest, ReplacesBothPlaceholdersEverywhere) {
  const std::string tmpl =
      "SERVER_PORT=50000\n"
      "IMEX_NODE_CONFIG_FILE={{ .IMEXDaemonNodesConfigPath }}\n"
      "IMEX_CMD_BIND_INTERFACE_IP={{ .IMEXCmdBindInterfaceIP }}\n"
      "# again: {{ .IMEXCmdBindInterfaceIP }}\n";
  absl::StatusOr<std::string> out = RenderImexConfig(tmpl, "10.0.0.7", "/imexd/nodes.cfg");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "SERVER_PORT=50000\n"
            "IMEX_NODE_CONFIG_FILE=/imexd/nodes.cfg\n"
            "IMEX_CMD_BIND_INTERFACE_IP=10.0.0.7\n"
            "# again: 10.0.0.7\n");
}

TEST(RenderImexConfigTest, UnknownPlaceholderIsAnErrorNamingTheLine) {
  absl::StatusOr<std::string> out =
      RenderImexConfig("A=1\nB={{ .Other }}\n", "10.0.0.7", "/imexd/nodes.cfg");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(out.status().message(), HasSubstr("{{ .Other }}"));
  EXPECT_THAT(out.status().message(), HasSubstr("{{ .IMEXCmdBindInterfaceIP }}"));
}

TEST(RenderImexConfigTest, MisspelledPlaceholderIsAnError) {
  EXPECT_FALSE(RenderImexConfig("X={{.IMEXCmdBindInterfaceIP}}\n", "1.2.3.4", "/n").ok());
}

TEST(StaticNodesFileTest, OneNamePerIndex) {
  absl::StatusOr<std::string> out = StaticNodesFile(3);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out,
            "compute-domain-daemon-0000\ncompute-domain-daemon-0001\ncompute-domain-daemon-0002\n");
}

TEST(StaticNodesFileTest, ZeroMaxNodesIsAnErrorNamingTheFlag) {
  absl::StatusOr<std::string> out = StaticNodesFile(0);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("MAX_NODES_PER_IMEX_DOMAIN"));
}

class ImexFilesDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/imexd-", ::getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(MakeDirectories(dir_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ImexFilesDirTest, WritesConfigFromTemplate) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/imexd.cfg.tmpl",
                                  "IMEX_CMD_BIND_INTERFACE_IP={{ .IMEXCmdBindInterfaceIP }}\n"
                                  "IMEX_NODE_CONFIG_FILE={{ .IMEXDaemonNodesConfigPath }}\n")
                  .ok());
  ASSERT_TRUE(WriteImexConfig(dir_, "192.168.1.5").ok());
  EXPECT_EQ(*ReadFile(ConfigPath(dir_)),
            absl::StrCat("IMEX_CMD_BIND_INTERFACE_IP=192.168.1.5\nIMEX_NODE_CONFIG_FILE=", dir_,
                         "/nodes.cfg\n"));
  ASSERT_TRUE(WriteStaticNodesFile(dir_, 2).ok());
  EXPECT_EQ(*ReadFile(dir_ + "/nodes.cfg"),
            "compute-domain-daemon-0000\ncompute-domain-daemon-0001\n");
}

TEST_F(ImexFilesDirTest, MissingTemplateIsNotFound) {
  absl::Status s = WriteImexConfig(dir_, "1.2.3.4");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("imexd.cfg.tmpl"));
}

TEST_F(ImexFilesDirTest, BadTemplateNamesTheFile) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/imexd.cfg.tmpl", "X={{ .Nope }}\n").ok());
  absl::Status s = WriteImexConfig(dir_, "1.2.3.4");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(dir_ + "/imexd.cfg.tmpl"));
  EXPECT_FALSE(std::filesystem::exists(ConfigPath(dir_)));
}

}  // namespace
}  // namespace dra::cddaemon
