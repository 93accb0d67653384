// PluginHost (plugin_host.h): the checkpoint policy both kubelet plugins share, the cleanup
// thread's wake-up after a later corruption, the stop order with the plugin's hooks, and the
// shared flag group. The API server named by the kubeconfig is never reached (events are best
// effort); the kubelet servers are covered by the plugins' integration tests.

#include "lib/kubeletplugin/plugin_host.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/flags.h"
#include "lib/kubeletplugin/test_util.h"
#include "lib/metrics/metrics.h"

namespace dra::kubeletplugin {
namespace {

namespace fs = std::filesystem;
using ::dra::kubeletplugin::testing::TempTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kDriver[] = "host-test.example.com";

// Replaces `path` by a new file (a new inode, so that the checkpoint reads it again).
void ReplaceFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

class PluginHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto signals = SignalHandler::Start();
    ASSERT_TRUE(signals.ok()) << signals.status();
    signals_ = *std::move(signals);
    const std::string kubeconfig = tree_.root() + "/kubeconfig";
    std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                                 "    server: https://127.0.0.1:1\nusers:\n- name: u\n  user:\n"
                                 "    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n"
                                 "    user: u\ncurrent-context: x\n";
    std::ofstream(tree_.root() + "/boot_id") << "boot-1\n";
    config_.node_name = "host-test-node";
    config_.kubeconfig = kubeconfig;
    config_.cdi_root = tree_.root() + "/cdi";
    config_.kubelet_plugins_dir = tree_.plugins();
    config_.kubelet_registrar_dir = tree_.registry();
    config_.boot_id_path = tree_.root() + "/boot_id";
    config_.cleanup_interval = absl::Hours(1);  // only a corruption makes a second pass
  }

  std::unique_ptr<PluginHost> NewHost() {
    return std::make_unique<PluginHost>(
        config_, PluginHost::Options{.driver_name = kDriver, .component = "host-test"},
        signals_.get());
  }
  std::string CheckpointPath() const {
    return tree_.plugins() + "/" + kDriver + "/" + checkpoint::kCheckpointFileName;
  }

  TempTree tree_;
  std::unique_ptr<SignalHandler> signals_;
  PluginHostConfig config_;
};

TEST_F(PluginHostTest, NodeNameIsRequiredAndDirectoriesAreMadePrivate) {
  config_.node_name.clear();
  EXPECT_THAT(NewHost()->MakeDirectories().message(), HasSubstr("--node-name is required"));
  config_.node_name = "host-test-node";
  std::unique_ptr<PluginHost> host = NewHost();
  ASSERT_TRUE(host->MakeDirectories().ok());
  EXPECT_EQ(host->plugin_dir(), tree_.plugins() + "/" + kDriver);
  struct stat st = {};
  ASSERT_EQ(::stat(host->plugin_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750);
  ASSERT_EQ(::stat(config_.cdi_root.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750);
}

// A corrupt file found by Open: counted at once, but the plugin's rebuild runs only when the
// plugin says its state is built (FinishCheckpointRecovery), once.
TEST_F(PluginHostTest, CorruptionAtOpenIsCountedAndRebuiltOnceTheStateIsBuilt) {
  fs::create_directories(tree_.plugins() + "/" + kDriver);
  std::ofstream(CheckpointPath()) << "{not json";
  std::unique_ptr<PluginHost> host = NewHost();
  ASSERT_TRUE(host->MakeDirectories().ok());
  ASSERT_TRUE(host->ConnectToApiServer().ok());
  int rebuilds = 0;
  absl::StatusOr<checkpoint::Checkpoint*> cp =
      host->OpenCheckpoint({.rebuild =
                                [&rebuilds] {
                                  ++rebuilds;
                                  return std::string("rebuilt 0 prepared claims");
                                },
                            .later_outcome = "later"});
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE((*cp)->open_corruption().has_value());
  EXPECT_THAT(host->registry()->Render(), HasSubstr("nvidia_dra_checkpoint_corruptions_total 1"));
  EXPECT_EQ(rebuilds, 0);
  host->FinishCheckpointRecovery();
  EXPECT_EQ(rebuilds, 1);
  // The corrupt file was moved aside and replaced by an empty checkpoint.
  absl::StatusOr<checkpoint::ClaimMap> claims = (*cp)->List();
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_TRUE(claims->empty());
  host->Stop({}, {});
}

// A corruption found by a later read (after the startup recovery) starts a cleanup pass at once,
// long before --cleanup-interval; one found before it does not (the startup rebuild covers it).
TEST_F(PluginHostTest, LaterCorruptionStartsACleanupPassAtOnce) {
  std::unique_ptr<PluginHost> host = NewHost();
  ASSERT_TRUE(host->MakeDirectories().ok());
  ASSERT_TRUE(host->ConnectToApiServer().ok());
  absl::StatusOr<checkpoint::Checkpoint*> cp = host->OpenCheckpoint({.later_outcome = "later"});
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_FALSE((*cp)->open_corruption().has_value());
  host->FinishCheckpointRecovery();

  absl::Mutex mu;
  int passes = 0;
  host->StartCleanup([&] {
    absl::MutexLock lock(&mu);
    ++passes;
  });
  auto passes_reach = [&](int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return passes >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&reached), timeout);
  };
  ASSERT_TRUE(passes_reach(1, absl::Seconds(10)));  // the first pass runs at once

  ReplaceFile(CheckpointPath(), "{not json");
  ASSERT_TRUE((*cp)->List().ok());  // replaced by an empty checkpoint
  EXPECT_THAT(host->registry()->Render(), HasSubstr("nvidia_dra_checkpoint_corruptions_total 1"));
  EXPECT_TRUE(passes_reach(2, absl::Seconds(20)));
  host->Stop({}, {});
}

TEST_F(PluginHostTest, StopRunsTheHooksInOrderAfterTheCleanupThreadEnded) {
  std::unique_ptr<PluginHost> host = NewHost();
  ASSERT_TRUE(host->MakeDirectories().ok());
  ASSERT_TRUE(host->ConnectToApiServer().ok());
  ASSERT_TRUE(host->OpenCheckpoint({}).ok());
  host->FinishCheckpointRecovery();
  absl::Mutex mu;
  std::vector<std::string> events;
  auto record = [&](const std::string& e) {
    absl::MutexLock lock(&mu);
    events.push_back(e);
  };
  bool first = true;
  host->StartCleanup([&] {
    if (first) record("pass");
    first = false;
  });
  {
    absl::MutexLock lock(&mu);
    auto passed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !events.empty(); };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&passed), absl::Seconds(10)));
  }
  const PluginHost::StopHooks hooks{.before_server_stop = [&] { record("before_server_stop"); },
                                    .after_server_stop = [&] { record("after_server_stop"); },
                                    .after_cleanup_stop = [&] { record("after_cleanup_stop"); }};
  host->Stop(hooks, {});
  host->Stop(hooks, {});  // idempotent: no hook runs twice
  absl::MutexLock lock(&mu);
  EXPECT_THAT(events,
              ElementsAre("pass", "before_server_stop", "after_server_stop", "after_cleanup_stop"));
}

// DescribeMetrics (the plugins' --help-metrics-markdown) registers exactly the families of a host
// that connected and serves its metrics endpoint.
TEST_F(PluginHostTest, DescribeMetricsIsWhatAConnectedServingHostRegisters) {
  config_.http_endpoint = "127.0.0.1:0";
  std::unique_ptr<PluginHost> host = NewHost();
  ASSERT_TRUE(host->MakeDirectories().ok());
  ASSERT_TRUE(host->ConnectToApiServer().ok());
  ASSERT_TRUE(host->ServeHttpAndHealthPort().ok());
  const std::string live = metrics::DescribeMarkdown(*host->registry());
  host.reset();
  EXPECT_THAT(live, HasSubstr("| `nvidia_dra_checkpoint_corruptions_total` | counter | - |"));
  EXPECT_THAT(live, HasSubstr("| `nvidia_dra_requests_total` | counter | `driver`, `operation` |"));
  EXPECT_THAT(live, HasSubstr("| `nvidia_dra_http_endpoint_connections_open` | gauge | - |"));
  metrics::Registry described;
  PluginHost::DescribeMetrics(&described);
  EXPECT_EQ(metrics::DescribeMarkdown(described), live);
}

// One definition of each shared flag: the binary's help texts where they differ, the same names,
// environment variables and defaults for both.
TEST(PluginHostFlagsTest, SharedFlagsParseFromTheCommandLineAndTheEnvironment) {
  PluginHostConfig c;
  Flags flags("test-plugin", "A test.");
  AddPluginHostFlags(flags, &c,
                     {.namespace_name = "NS-HELP",
                      .cdi_root = "CDI-HELP",
                      .container_driver_root = "CTR-HELP",
                      .proc_root = "PROC-HELP",
                      .alt_proc_devices = "ALT-HELP",
                      .kubelet_plugins_dir = "PLUGINS-HELP",
                      .cleanup_interval = "CLEANUP-HELP"});
  std::map<std::string, std::string> env = {{"POD_UID", "uid-1"}, {"HOST_DRIVER_ROOT", "/run/d"}};
  flags.SetEnvLookupForTest([&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
  for (const char* help : {"NS-HELP", "CDI-HELP", "CTR-HELP", "PROC-HELP", "ALT-HELP",
                           "PLUGINS-HELP", "CLEANUP-HELP"}) {
    EXPECT_THAT(flags.Help(), HasSubstr(help));
  }
  const char* argv[] = {
      "test-plugin",          "--node-name=n1",   "--cleanup-interval=30s",
      "--healthcheck-port=0", "--kube-api-qps=7", "--kubelet-plugins-directory-path=/p"};
  absl::StatusOr<Flags::ParseResult> r = flags.Parse(std::size(argv), argv);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(c.node_name, "n1");
  EXPECT_EQ(c.pod_uid, "uid-1");
  EXPECT_EQ(c.nvidia_driver_root, "/run/d");
  EXPECT_EQ(c.cleanup_interval, absl::Seconds(30));
  EXPECT_EQ(c.healthcheck_port, 0);
  EXPECT_EQ(c.kube_api_qps, 7);
  EXPECT_EQ(c.kubelet_plugins_dir, "/p");
  EXPECT_EQ(c.cdi_root, "/etc/cdi");  // the default
  EXPECT_EQ(c.namespace_name, "default");
}

}  // namespace
}  // namespace dra::kubeletplugin
