// The compute-domain-kubelet-plugin binary's flags and its startup checks that fail before it
// talks to the API server: --help, --help-steps-markdown, bad flag values, an unknown IMEX mode, a
// driver too old for DNS-named IMEX daemons, GPUs in different cliques, a driver root without IMEX
// channels.

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdplugin/claim_steps.h"
#include "nlohmann/json.hpp"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/build_paths.h"

namespace dra::cdplugin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBinary =
    dra::testing::BinaryDir() + "/cmd/compute-domain-kubelet-plugin/compute-domain-kubelet-plugin";

dra::testing::CommandResult RunPlugin(std::vector<std::string> args) {
  args.insert(args.begin(), kBinary);
  auto r = dra::testing::RunCommand(args);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : dra::testing::CommandResult{};
}

TEST(PluginStartupTest, HelpListsEveryFlagWithItsEnvironmentVariable) {
  auto r = RunPlugin({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--node-name string (env NODE_NAME; required)",
                           "--namespace",
                           "--cdi-root",
                           "--nvidia-driver-root, --host-driver-root",
                           "HOST_DRIVER_ROOT",
                           "--container-driver-root",
                           "DRIVER_ROOT_CTR_PATH",
                           "--kubelet-registrar-directory-path",
                           "--kubelet-plugins-directory-path",
                           "--healthcheck-port",
                           "--http-endpoint",
                           "--metrics-path",
                           "--gpu-clique-label-enabled",
                           "--imex-mode",
                           "--imex-isolation",
                           "--imex-host-socket-path",
                           "--nvidia-cdi-hook-path",
                           "--kubeconfig",
                           "--kube-api-qps",
                           "--kube-api-burst",
                           "--feature-gates",
                           "--proc-root",
                           "--cleanup-interval"}) {
    EXPECT_THAT(r.output, HasSubstr(flag));
  }
}

TEST(PluginStartupTest, HelpStepsMarkdownPrintsTheStepTable) {
  auto r = RunPlugin({"--help-steps-markdown"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, CdStepTableMarkdown());
}

TEST(PluginStartupTest, BadFlagsAreClearErrors) {
  auto missing = RunPlugin({});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.output, HasSubstr("missing required flag --node-name (env NODE_NAME)"));
  auto bad_int = RunPlugin({"--node-name=n", "--healthcheck-port=abc"});
  EXPECT_NE(bad_int.exit_code, 0);
  EXPECT_THAT(bad_int.output, HasSubstr("invalid value \"abc\" for --healthcheck-port"));
  auto unknown = RunPlugin({"--node-name=n", "--no-such-flag"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("unknown flag --no-such-flag"));
}

class StartupFailureTest : public ::testing::Test {
 protected:
  // Runs the plugin against `root` until it fails (it must fail before reaching the API server).
  dra::testing::CommandResult Start(const std::string& root, std::vector<std::string> extra = {}) {
    // A kubeconfig naming a server that is never reached: every case fails before.
    const std::string kubeconfig = dir_.path() + "/kubeconfig";
    std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                                 "    server: https://127.0.0.1:1\nusers:\n- name: u\n  user:\n"
                                 "    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
                                 "    user: u\ncurrent-context: x\n";
    std::vector<std::string> args = {"--node-name=startup-test-node",
                                     "--kubeconfig=" + kubeconfig,
                                     "--cdi-root=" + dir_.path() + "/cdi",
                                     "--nvidia-driver-root=" + root,
                                     "--container-driver-root=" + root,
                                     "--proc-root=" + root + "/proc",
                                     "--kubelet-plugins-directory-path=" + dir_.path() + "/plugins",
                                     "--kubelet-registrar-directory-path=" + dir_.path() + "/reg"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunPlugin(args);
  }
  // gb200-4x with `edit` applied to its profile.
  std::string Root(const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(dra::testing::ProfilePath("gb200-4x"));
    nlohmann::json profile = nlohmann::json::parse(in);
    edit(profile);
    const std::string path = dir_.path() + "/profile.json";
    std::ofstream(path) << profile.dump(2);
    std::string root = dir_.path() + "/root";
    EXPECT_TRUE(dra::testing::MakeMockDriverRoot(path, root).ok());
    return root;
  }
  dra::testing::TempDir dir_;
};

TEST_F(StartupFailureTest, UnknownImexModeAndIsolation) {
  auto mode = Start(dir_.path(), {"--imex-mode=sideways"});
  EXPECT_EQ(mode.exit_code, 1);
  EXPECT_THAT(
      mode.output,
      HasSubstr(
          "--imex-mode: unknown value \\\"sideways\\\" (allowed: driverManaged, hostManaged)"));
  auto host = Start(dir_.path(), {"--imex-mode=hostManaged"});
  EXPECT_EQ(host.exit_code, 1);
  EXPECT_THAT(host.output, HasSubstr("requires the feature gate HostManagedIMEXDaemon"));
  auto isolation = Start(dir_.path(), {"--imex-isolation=channel"});
  EXPECT_EQ(isolation.exit_code, 1);
  EXPECT_THAT(isolation.output, HasSubstr("not supported yet"));
}

TEST_F(StartupFailureTest, DriverTooOldForDnsNames) {
  const std::string root = Root([](nlohmann::json& p) { p["driver_version"] = "570.86.15"; });
  auto r = Start(root);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("NVIDIA driver 570.86.15 is older than 570.158.01"));
  // The advice names what the operator can do: IMEXDaemonsWithDNSNames=false is refused by the
  // gate registry, so it must not be offered.
  EXPECT_THAT(r.output, HasSubstr("; upgrade the driver"));
  EXPECT_THAT(r.output, Not(HasSubstr("IMEXDaemonsWithDNSNames=false")));
}

TEST_F(StartupFailureTest, GpusInDifferentCliques) {
  const std::string root = Root([](nlohmann::json& p) {
    nlohmann::json fabric = p["gpu_defaults"]["fabric"];
    fabric["clique_id"] = 8;
    p["gpus"][1]["fabric"] = fabric;
  });
  auto r = Start(root);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("unexpected number of unique ClusterUUIDs/CliqueIDs"));
}

TEST_F(StartupFailureTest, FabricNotAttachedIsFatal) {
  const std::string root =
      Root([](nlohmann::json& p) { p["gpu_defaults"]["fabric"]["state"] = "in_progress"; });
  auto strict = Start(root);
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_THAT(strict.output, HasSubstr("NVLink fabric not attached"));
}

}  // namespace
}  // namespace dra::cdplugin
