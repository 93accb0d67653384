// An MPS control daemon on a real local node (hack/cluster/): Start + AssertReady, the pod and
// the fake nvidia-cuda-mps-control's recorded settings, then Stop, and nothing is left.
//
// The node runs in a mount namespace of its own (docs/development.md "Layout"): the kubelet and
// containerd see /var/lib/kubelet/plugins/gpu.nvidia.com, which on the host is
// <node state dir>/kubelet/plugins/gpu.nvidia.com (nodes.env names the state dir; by default
// /var/lib/dra-nodes/<node>). The plugin's pod (the Helm chart's DaemonSet) makes its mounts in
// that namespace too: its plugins folder propagates them to the node. So this test runs
// mps_daemon_node_tool through `nsenter --mount=<pin>`, which creates the directories and mounts
// the tmpfs where containerd resolves the Deployment's hostPath volumes. The test itself reads
// files through the host path and the mount table through nsenter.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"
#include "lib/gpuplugin/mps/mps_daemon.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/rest_config.h"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/cluster_env.h"

namespace dra::gpu {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kNode[] = "dra-node-1";
constexpr char kPluginDataDir[] = "/var/lib/kubelet/plugins/gpu.nvidia.com";  // inside the node
constexpr k8s::ResourceInfo kNamespaces{"", "v1", "Namespace", "namespaces", false};

// KEY=VALUE words of nodes.env.
std::map<std::string, std::string> NodesEnv() {
  std::map<std::string, std::string> out;
  absl::StatusOr<std::string> text = ReadFile(dra::testing::ClusterDir() + "/nodes.env");
  if (!text.ok()) return out;
  for (absl::string_view word : absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (word[0] == '#' || eq == absl::string_view::npos) continue;
    std::string value(word.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    out[std::string(word.substr(0, eq))] = value;
  }
  return out;
}

std::string RandomHex(int n) {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back("0123456789abcdef"[rd() % 16]);
  return out;
}

class MpsDaemonIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<std::string, std::string> env = NodesEnv();
    mntns_ = env["DRA_NODE_1_MNTNS"];
    image_ = env["DRA_WORKLOAD_IMAGE"];
    ASSERT_EQ(env["DRA_NODE_1_NAME"], kNode)
        << "no local node " << kNode << " (start it: hack/cluster/up.sh --nodes 2)";
    ASSERT_FALSE(mntns_.empty());
    ASSERT_FALSE(image_.empty());
    // The node's host folder follows DRA_NODE_STATE_ROOT (hack/cluster/node-lib.sh); nodes.env says
    // where it is.
    node_root_ = env["DRA_NODE_1_STATE_DIR"];
    ASSERT_FALSE(node_root_.empty()) << "nodes.env has no DRA_NODE_1_STATE_DIR (restart the nodes)";
    driver_root_ = node_root_ + "/driver-root";

    // A mock driver root of this test's own in the node's folder (the Helm install's is
    // helm-driver-root), made or refreshed (keeping the profile and state of an earlier run) so
    // that it holds this build's fake nvidia-cuda-mps-control.
    const std::string installed = driver_root_ + "/var/lib/mock-nvml/profile.json";
    const std::string profile = std::filesystem::exists(installed) ? (tmp_.path() + "/profile.json")
                                                                   : std::string("h100-8x");
    if (std::filesystem::exists(installed)) {
      std::filesystem::copy_file(installed, profile);
    }
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot(profile, driver_root_, false).ok());

    absl::StatusOr<dra::testing::CommandResult> list = Smi({"-L"});
    ASSERT_TRUE(list.ok()) << list.status();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(list->output, m, std::regex(R"(\(UUID: (GPU-[0-9a-f-]+)\))")))
        << list->output;
    gpu_ = m[1];

    absl::StatusOr<k8s::RestConfig> cfg = k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto client = k8s::Client::Create(*cfg);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ns_ = "mps-it-" + RandomHex(6);
    ASSERT_TRUE(
        client_
            ->Create(kNamespaces, "",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}})
            .ok());
  }

  void TearDown() override {
    if (client_ != nullptr) {
      k8s::DeleteOptions o;
      o.propagation_policy = "Background";
      (void)client_->Delete(kNamespaces, "", ns_, o);
    }
  }

  absl::StatusOr<dra::testing::CommandResult> Smi(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {driver_root_ + "/usr/bin/nvidia-smi"};
    argv.insert(argv.end(), args.begin(), args.end());
    return dra::testing::RunCommand(
        argv, {{"LD_PRELOAD", driver_root_ + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}});
  }

  std::string ComputeMode() {
    absl::StatusOr<dra::testing::CommandResult> q = Smi({"-q", "-i", gpu_});
    std::smatch m;
    if (!q.ok() || !std::regex_search(q->output, m, std::regex(R"(Compute Mode\s*: (\S+))"))) {
      return "?";
    }
    return m[1];
  }

  // Runs `argv` inside the node's mount namespace.
  dra::testing::CommandResult InNode(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"/usr/bin/nsenter", "--mount=" + mntns_, "--"});
    absl::StatusOr<dra::testing::CommandResult> r = dra::testing::RunCommand(argv);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : dra::testing::CommandResult{};
  }

  std::vector<std::string> ToolFlags() {
    return {"--kubeconfig=" + dra::testing::AdminKubeconfig(),
            "--node=" + std::string(kNode),
            "--namespace=" + ns_,
            "--image=" + image_,
            "--driver-root=" + driver_root_,
            "--plugin-data-dir=" + std::string(kPluginDataDir)};
  }

  std::string NodeMountinfo() { return InNode({"/bin/cat", "/proc/self/mountinfo"}).output; }

  json Pods(const std::string& app) {
    k8s::ListOptions o;
    o.label_selector = "app=" + app;
    absl::StatusOr<json> pods = client_->List(k8s::Pod::kResource, ns_, o);
    EXPECT_TRUE(pods.ok()) << pods.status();
    return pods.ok() ? (*pods)["items"] : json::array();
  }

  dra::testing::TempDir tmp_;
  std::string mntns_, image_, node_root_, driver_root_, gpu_, ns_;
  std::unique_ptr<k8s::Client> client_;
};

TEST_F(MpsDaemonIntegrationTest, StartReadyStopOnARealNode) {
  const std::string claim_uid = absl::StrCat(RandomHex(8), "-", RandomHex(4), "-4", RandomHex(3),
                                             "-8", RandomHex(3), "-", RandomHex(12));
  const std::string id = MpsDaemonId(claim_uid, {gpu_});
  const std::string name = MpsDeploymentName(id);
  const std::string node_dir = MpsDaemonDir(kPluginDataDir, id);
  const std::string host_dir = MpsDaemonDir(node_root_ + "/kubelet/plugins/gpu.nvidia.com", id);
  const MpsDaemonRecord record{.id = id, .ns = ns_, .full_gpu_uuids = {gpu_}};
  const std::string record_flag = "--record=" + MpsDaemonRecordToJson(record).dump();

  std::vector<std::string> start = {DRA_MPS_NODE_TOOL, "start"};
  for (const std::string& f : ToolFlags()) start.push_back(f);
  start.push_back("--claim-uid=" + claim_uid);
  start.push_back("--gpu=" + gpu_);
  start.push_back("--threads=50");
  start.push_back("--pinned=" + gpu_ + "=1024");
  start.push_back(
      "--ready-attempts=8");  // a cold node may need more than the Go driver's 4 attempts
  dra::testing::CommandResult started = InNode(start);
  ASSERT_EQ(started.exit_code, 0) << started.output;
  EXPECT_THAT(started.output, HasSubstr(MpsDaemonRecordToJson(record).dump()));

  // One pod, on the node, Ready.
  json pods = Pods(name);
  ASSERT_EQ(pods.size(), 1u) << pods.dump();
  EXPECT_EQ(pods[0]["spec"]["nodeName"], kNode);
  EXPECT_EQ(pods[0]["status"]["phase"], "Running");
  EXPECT_EQ(pods[0]["status"]["containerStatuses"][0]["ready"], true);

  // What the fake control daemon was told, exactly.
  absl::StatusOr<std::string> settings_text = ReadFile(host_dir + "/pipe/settings.json");
  ASSERT_TRUE(settings_text.ok()) << settings_text.status();
  json settings = json::parse(*settings_text);
  ASSERT_TRUE(settings.contains("pid"));
  const int pid = settings["pid"];
  settings.erase("pid");
  EXPECT_EQ(settings, json({{"multiUser", false},
                            {"visibleDevices", {gpu_}},
                            {"pipeDirectory", "/driver-root/tmp/nvidia-mps"},
                            {"defaultActiveThreadPercentage", 50.0},
                            {"defaultDevicePinnedMemLimits", {{gpu_, "1024M"}}}}));
  absl::StatusOr<std::string> startup = ReadFile(host_dir + "/log/startup.log");
  ASSERT_TRUE(startup.ok()) << startup.status();
  EXPECT_EQ(*startup, "startup complete\n");
  EXPECT_THAT(ReadFile(host_dir + "/log/control.log").value_or(""),
              HasSubstr("command: set_default_device_pinned_mem_limit " + gpu_ + " 1024M"));
  EXPECT_EQ(ComputeMode(), "Exclusive_Process");

  // The tmpfs is mounted in the node's namespace, and it is the pod's /dev/shm: the daemon's
  // marker file is in it.
  std::string mountinfo = NodeMountinfo();
  EXPECT_THAT(mountinfo, HasSubstr(" " + node_dir + "/shm rw,nosuid,nodev,noexec,relatime"));
  dra::testing::CommandResult marker = InNode(
      {"/usr/bin/test", "-e", node_dir + "/shm/nvidia-mps-control-daemon." + std::to_string(pid)});
  EXPECT_EQ(marker.exit_code, 0) << "no daemon marker in the tmpfs";

  std::vector<std::string> stop = {DRA_MPS_NODE_TOOL, "stop"};
  for (const std::string& f : ToolFlags()) stop.push_back(f);
  stop.push_back(record_flag);
  dra::testing::CommandResult stopped = InNode(stop);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;

  absl::StatusOr<json> deployment = client_->Get(kDeploymentResource, ns_, name);
  EXPECT_TRUE(absl::IsNotFound(deployment.status())) << deployment.status();
  EXPECT_TRUE(Pods(name).empty());
  EXPECT_FALSE(std::filesystem::exists(host_dir));
  EXPECT_THAT(NodeMountinfo(), ::testing::Not(HasSubstr(node_dir)));
  EXPECT_EQ(ComputeMode(), "Default");

  // Stop again: nothing to do.
  dra::testing::CommandResult again = InNode(stop);
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

// What an operator reads when the daemon cannot start: here its image is not on the node.
TEST_F(MpsDaemonIntegrationTest, NotReadyErrorNamesTheReasonAndStopCleansUp) {
  const std::string claim_uid = absl::StrCat(RandomHex(8), "-", RandomHex(4), "-4", RandomHex(3),
                                             "-8", RandomHex(3), "-", RandomHex(12));
  const std::string id = MpsDaemonId(claim_uid, {gpu_});
  const std::string host_dir = MpsDaemonDir(node_root_ + "/kubelet/plugins/gpu.nvidia.com", id);
  std::vector<std::string> start = {DRA_MPS_NODE_TOOL, "start"};
  for (const std::string& f : ToolFlags()) start.push_back(f);
  start.push_back("--image=localhost/dra-no-such-image:v1");
  start.push_back("--claim-uid=" + claim_uid);
  start.push_back("--gpu=" + gpu_);
  // About 20 s (backoff 1.5, 3, 6, 10 s): enough for a node's first pod sandbox when this test runs
  // before any other pod on the node (the order of tests is not fixed).
  start.push_back("--ready-attempts=5");
  dra::testing::CommandResult started = InNode(start);
  EXPECT_EQ(started.exit_code, 1) << started.output;
  EXPECT_THAT(started.output, HasSubstr("not ready after 5 attempts"));
  EXPECT_THAT(started.output, HasSubstr("container mps-control-daemon waiting: ErrImageNeverPull"));
  EXPECT_THAT(started.output, HasSubstr("localhost/dra-no-such-image:v1"));
  EXPECT_EQ(ComputeMode(), "Exclusive_Process");  // Start did its part; unprepare undoes it

  const MpsDaemonRecord record{.id = id, .ns = ns_, .full_gpu_uuids = {gpu_}};
  std::vector<std::string> stop = {DRA_MPS_NODE_TOOL, "stop"};
  for (const std::string& f : ToolFlags()) stop.push_back(f);
  stop.push_back("--record=" + MpsDaemonRecordToJson(record).dump());
  dra::testing::CommandResult stopped = InNode(stop);
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_TRUE(
      absl::IsNotFound(client_->Get(kDeploymentResource, ns_, MpsDeploymentName(id)).status()));
  EXPECT_FALSE(std::filesystem::exists(host_dir));
  EXPECT_EQ(ComputeMode(), "Default");
}

}  // namespace
}  // namespace dra::gpu
