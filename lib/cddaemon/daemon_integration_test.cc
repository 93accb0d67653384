// Runs real `compute-domain-daemon run` processes (two simulated nodes, each with its own imexd
// dir, hosts file and fake nvidia-imex on its own 127.0.0.x address) against the local API server.
// The pods are API objects bound to node names that do not exist, so no kubelet runs them; the
// test plays the kubelet by writing their status. The compute-domain controller runs in-process:
// it is the clique's only writer, listing each daemon whose pod carries the clique label.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdcontroller/controller.h"
#include "lib/common/atomic_file.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/rest_config.h"
#include "test/support/build_paths.h"
#include "test/support/cluster_env.h"
#include "test/support/crds.h"
#include "test/support/namespaces.h"

namespace dra::cddaemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr k8s::ResourceInfo kNamespace{"", "v1", "Namespace", "namespaces", false};
constexpr k8s::ResourceInfo kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
const std::string kDaemonBinary =
    dra::testing::BinaryDir() + "/cmd/compute-domain-daemon/compute-domain-daemon";
const std::string kFakeImex = dra::testing::BinaryDir() + "/test/doubles/imex/nvidia-imex";
const std::string kFakeImexCtl = dra::testing::BinaryDir() + "/test/doubles/imex/nvidia-imex-ctl";
constexpr char kCliqueId[] = "a1b2c3d4-0000-4000-8000-000000000001.7";

bool Eventually(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(20)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return cond();
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
  (void)::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

// One simulated node: its pod object, its files and its daemon process.
struct SimNode {
  std::string node_name;
  std::string pod_name;
  std::string pod_uid;
  std::string ip;
  std::string dir;
  pid_t pid = 0;
  std::string imexd() const { return dir + "/imexd"; }
  std::string hosts() const { return dir + "/hosts"; }
  std::string log() const { return dir + "/daemon.log"; }
};

class DaemonIntegrationTest : public ::testing::Test {
 protected:
  // The ComputeDomain CRDs: every run starts from an empty control plane.
  static void SetUpTestSuite() {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }

  void SetUp() override {
    auto rest = k8s::LoadKubeconfig(testing::AdminKubeconfig());
    ASSERT_TRUE(rest.ok()) << rest.status();
    auto client = k8s::Client::Create(*rest);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    std::mt19937 rng(std::random_device{}());
    suffix_ = absl::StrFormat("%06x", rng() & 0xffffff);
    ns_ = absl::StrCat("cdd-it-", suffix_);
    absl::Status created =
        dra::testing::CreateNamespaceForPods(client_.get(), {{"metadata", {{"name", ns_}}}});
    ASSERT_TRUE(created.ok()) << created;
    work_ = absl::StrCat(::testing::TempDir(), "/cdd-it-", suffix_);
    std::filesystem::create_directories(work_);
    port_ = FreePort();

    nlohmann::json cd = {
        {"apiVersion", "resource.nvidia.com/v1beta1"},
        {"kind", "ComputeDomain"},
        {"metadata", {{"name", "domain"}, {"namespace", ns_}}},
        {"spec", {{"numNodes", 0}, {"channel", {{"resourceClaimTemplate", {{"name", "ch"}}}}}}}};
    auto cd_out = client_->Create(k8s::ComputeDomain::kResource, ns_, cd);
    ASSERT_TRUE(cd_out.ok()) << cd_out.status();
    cd_uid_ = (*cd_out)["metadata"]["uid"];
    // The pods' controller: a ConfigMap, so that the domain's DaemonSet does not adopt them.
    auto owner = client_->Create(kConfigMaps, ns_, {{"metadata", {{"name", "pod-owner"}}}});
    ASSERT_TRUE(owner.ok()) << owner.status();
    owner_ = *owner;

    cdcontroller::ControllerConfig config;
    config.pod_name = "cdd-it";
    config.driver_namespace = ns_;
    config.watch_namespace = ns_;
    config.image_name = "registry.invalid/dra:test";
    config.feature_gates_text = "ComputeDomainCliques=true";
    config.max_nodes_per_imex_domain = 4;
    config.node_label_cleanup_filter = [](absl::string_view) { return false; };
    auto ctrl = cdcontroller::Controller::Create(client_.get(), config, nullptr);
    ASSERT_TRUE(ctrl.ok()) << ctrl.status();
    controller_ = *std::move(ctrl);
    ASSERT_TRUE(controller_->Start(absl::Seconds(30)).ok());
  }

  void TearDown() override {
    for (SimNode& n : nodes_) StopDaemon(n, SIGKILL);
    // Fake IMEX children of killed daemons are orphans; their pids are in the daemon logs.
    for (SimNode& n : nodes_) KillImexChildren(n);
    // No kubelet runs these pods, so a graceful delete would wait for one forever: force it.
    k8s::DeleteOptions now;
    now.grace_period_seconds = 0;
    for (SimNode& n : nodes_) (void)client_->Delete(k8s::Pod::kResource, ns_, n.pod_name, now);
    // The controller removes the domain's finalizer; then the namespace can go.
    if (controller_) {
      (void)client_->Delete(k8s::ComputeDomain::kResource, ns_, "domain");
      Eventually([&] {
        return absl::IsNotFound(
            client_->Get(k8s::ComputeDomain::kResource, ns_, "domain").status());
      });
      controller_->Stop();
    }
    (void)client_->Delete(kNamespace, "", ns_);
    // Kept for inspection after a failure, or when DRA_KEEP_TEST_DIRS is set.
    if (!HasFailure() && std::getenv("DRA_KEEP_TEST_DIRS") == nullptr) {
      std::filesystem::remove_all(work_);
    }
  }

  // The fixture owns the nodes, so TearDown can stop what a failed test left running.
  SimNode& MakeNode(const std::string& letter, const std::string& ip) {
    SimNode& n = nodes_.emplace_back();
    n.node_name = absl::StrCat("cdd-fake-node-", letter, "-", suffix_);
    n.pod_name = absl::StrCat("daemon-", letter);
    n.ip = ip;
    n.dir = absl::StrCat(work_, "/", letter);
    std::filesystem::create_directories(n.imexd());
    nlohmann::json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", n.pod_name},
          {"namespace", ns_},
          {"labels", {{std::string(k8s::kComputeDomainLabel), cd_uid_}}},
          {"ownerReferences",
           {{{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"name", "pod-owner"},
             {"uid", owner_["metadata"]["uid"]},
             {"controller", true}}}}}},
        {"spec",
         {{"nodeName", n.node_name},
          {"containers", {{{"name", "compute-domain-daemon"}, {"image", "none"}}}}}}};
    auto out = client_->Create(k8s::Pod::kResource, ns_, pod);
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) n.pod_uid = (*out)["metadata"]["uid"];
    SetPodReady(n, false);  // running, with its IP, not Ready yet
    // What the kubelet plugin writes (spec 3.3, ports moved so that tests do not collide).
    std::string tmpl = absl::StrCat(
        "LOG_LEVEL=4\nLOG_FILE_NAME=\nDAEMONIZE=0\nBIND_INTERFACE_IP=\nSERVER_PORT=", port_,
        "\nIMEX_NODE_CONFIG_FILE={{ .IMEXDaemonNodesConfigPath }}\nIMEX_WAIT_FOR_QUORUM=RECOVERY\n"
        "IMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP={{ .IMEXCmdBindInterfaceIP }}\n"
        "IMEX_CMD_PORT=",
        port_ + 1, "\nIMEX_NODE_DISCONNECTED_GRACE_TIME=-1\n");
    EXPECT_TRUE(WriteFileAtomically(n.imexd() + "/imexd.cfg.tmpl", tmpl).ok());
    EXPECT_TRUE(WriteFileAtomically(
                    n.hosts(), absl::StrCat("127.0.0.1\tlocalhost\n", ip, "\t", n.pod_name, "\n"))
                    .ok());
    return n;
  }

  std::vector<std::string> Flags(const SimNode& n, const std::string& clique) {
    return {"--cliqueid=" + clique,          "--compute-domain-uuid=" + cd_uid_,
            "--compute-domain-name=domain",  "--compute-domain-namespace=" + ns_,
            "--node-name=" + n.node_name,    "--pod-ip=" + n.ip,
            "--pod-uid=" + n.pod_uid,        "--pod-name=" + n.pod_name,
            "--pod-namespace=" + ns_,        "--max-nodes-per-imex-domain=4",
            "--imexd-dir=" + n.imexd(),      "--hosts-file=" + n.hosts(),
            "--imex-binary=" + imex_binary_, "--imex-ctl-binary=" + kFakeImexCtl,
            "--imex-stop-timeout=3s",        "--kubeconfig=" + testing::AdminKubeconfig()};
  }

  // Forks `compute-domain-daemon <flags> <command>` with output to `log`.
  pid_t Spawn(const SimNode& n, const std::string& command, const std::string& clique,
              const std::string& log) {
    std::vector<std::string> args = {kDaemonBinary, "-v", "2"};
    for (std::string& f : Flags(n, clique)) args.push_back(std::move(f));
    args.push_back(command);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("FAKE_IMEX_HOSTS_FILE", n.hosts().c_str(), 1);
      std::freopen(log.c_str(), "a", stdout);
      std::freopen(log.c_str(), "a", stderr);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  void StartDaemon(SimNode& n, const std::string& clique = kCliqueId) {
    n.pid = Spawn(n, "run", clique, n.log());
  }

  // Returns the exit status (or -1 when killed by a signal).
  int StopDaemon(SimNode& n, int sig, absl::Duration timeout = absl::Seconds(20)) {
    if (n.pid <= 0) return -1;
    ::kill(n.pid, sig);
    int status = 0;
    absl::Time deadline = absl::Now() + timeout;
    while (::waitpid(n.pid, &status, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        ::kill(n.pid, SIGKILL);
        ::waitpid(n.pid, &status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    n.pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  void KillImexChildren(const SimNode& n) {
    auto log = ReadFile(n.log());
    if (!log.ok()) return;
    for (absl::string_view line : absl::StrSplit(*log, '\n')) {
      size_t at = line.find("\"started nvidia-imex\" pid=");
      if (at == absl::string_view::npos) continue;
      int pid = std::atoi(std::string(line.substr(at + 26)).c_str());
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  }

  // `check` exit code; its output lands in <dir>/check.out.
  int Check(const SimNode& n, const std::string& clique = kCliqueId) {
    std::string out = n.dir + "/check.out";
    std::filesystem::remove(out);
    pid_t pid = Spawn(n, "check", clique, out);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  absl::StatusOr<k8s::ComputeDomainClique> Clique() {
    auto j = client_->Get(k8s::ComputeDomainClique::kResource, ns_,
                          k8s::CliqueObjectName(cd_uid_, kCliqueId));
    if (!j.ok()) return j.status();
    return k8s::ComputeDomainClique::FromJson(*j);
  }
  const k8s::ComputeDomainDaemonInfo* Entry(const k8s::ComputeDomainClique& c, const SimNode& n) {
    for (const auto& d : c.daemons) {
      if (d.node_name == n.node_name) return &d;
    }
    return nullptr;
  }
  bool EntryMatches(const SimNode& n,
                    const std::function<bool(const k8s::ComputeDomainDaemonInfo*)>& pred) {
    auto c = Clique();
    return c.ok() && pred(Entry(*c, n));
  }

  void SetPodReady(const SimNode& n, bool ready) {
    auto pod = client_->Get(k8s::Pod::kResource, ns_, n.pod_name);
    ASSERT_TRUE(pod.ok()) << pod.status();
    (*pod)["status"] = {{"phase", "Running"},
                        {"podIP", n.ip},
                        {"conditions",
                         {{{"type", "Ready"}, {"status", ready ? "True" : "False"}},
                          {{"type", "PodScheduled"}, {"status", "True"}}}}};
    auto out = client_->UpdateStatus(k8s::Pod::kResource, ns_, *pod);
    ASSERT_TRUE(out.ok()) << out.status();
  }

  std::string Label(const SimNode& n) {
    auto pod = client_->Get(k8s::Pod::kResource, ns_, n.pod_name);
    if (!pod.ok()) return "<error>";
    const nlohmann::json& labels = (*pod)["metadata"].value("labels", nlohmann::json::object());
    auto it = labels.find("resource.nvidia.com/computeDomain.cliqueID");
    return it == labels.end() ? "<none>" : it->get<std::string>();
  }

  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<cdcontroller::Controller> controller_;
  nlohmann::json owner_;
  std::string suffix_;
  std::string ns_;
  std::string work_;
  std::string cd_uid_;
  int port_ = 0;
  std::string imex_binary_ = kFakeImex;
  std::deque<SimNode> nodes_;
};

std::string HostsLine(const std::string& ip, int index) {
  return absl::StrFormat("%s\tcompute-domain-daemon-%04d\n", ip, index);
}

TEST_F(DaemonIntegrationTest, TwoDaemonsRegisterConnectBecomeReadyAndDeregister) {
  SimNode& a = MakeNode("a", "127.0.0.2");
  SimNode& b = MakeNode("b", "127.0.0.3");
  StartDaemon(a);
  StartDaemon(b);

  // Both entries, distinct indices 0 and 1, NotReady, owner references to both pods.
  ASSERT_TRUE(Eventually([&] {
    auto c = Clique();
    return c.ok() && Entry(*c, a) != nullptr && Entry(*c, b) != nullptr;
  })) << ReadFile(a.log()).value_or("")
      << ReadFile(b.log()).value_or("");
  auto clique = Clique();
  ASSERT_TRUE(clique.ok());
  const auto* ea = Entry(*clique, a);
  const auto* eb = Entry(*clique, b);
  EXPECT_NE(ea->index, eb->index);
  EXPECT_THAT(
      (std::vector<int64_t>{std::min(ea->index, eb->index), std::max(ea->index, eb->index)}),
      ::testing::ElementsAre(0, 1));
  EXPECT_EQ(ea->ip_address, a.ip);
  EXPECT_EQ(eb->ip_address, b.ip);
  EXPECT_EQ(ea->clique_id, kCliqueId);
  EXPECT_EQ(ea->status, "NotReady");
  EXPECT_EQ(clique->metadata.labels.at("resource.nvidia.com/computeDomain"), cd_uid_);
  EXPECT_EQ(clique->metadata.labels.at("resource.nvidia.com/computeDomain.cliqueID"), kCliqueId);
  EXPECT_EQ(clique->metadata.owner_references.size(), 2u);
  EXPECT_EQ(Label(a), kCliqueId);
  EXPECT_EQ(Label(b), kCliqueId);
  const int ia = static_cast<int>(ea->index), ib = static_cast<int>(eb->index);

  // The config and nodes files, and both hosts files map both names (other lines kept).
  EXPECT_THAT(ReadFile(a.imexd() + "/imexd.cfg").value_or(""),
              HasSubstr("IMEX_CMD_BIND_INTERFACE_IP=127.0.0.2\n"));
  EXPECT_EQ(ReadFile(a.imexd() + "/nodes.cfg").value_or(""),
            "compute-domain-daemon-0000\ncompute-domain-daemon-0001\ncompute-domain-daemon-0002\n"
            "compute-domain-daemon-0003\n");
  for (const SimNode* n : {&a, &b}) {
    ASSERT_TRUE(Eventually([&] {
      std::string h = ReadFile(n->hosts()).value_or("");
      return absl::StrContains(h, HostsLine(a.ip, ia)) && absl::StrContains(h, HostsLine(b.ip, ib));
    })) << ReadFile(n->hosts()).value_or("");
    EXPECT_THAT(ReadFile(n->hosts()).value_or(""), HasSubstr("127.0.0.1\tlocalhost\n"));
  }

  // The fakes connect (a after b's mapping arrives, through SIGUSR1): check passes, quietly.
  EXPECT_TRUE(Eventually([&] { return Check(a) == 0 && Check(b) == 0; }))
      << ReadFile(a.dir + "/check.out").value_or("") << ReadFile(b.dir + "/check.out").value_or("");
  EXPECT_EQ(ReadFile(a.dir + "/check.out").value_or("x"), "");

  // The kubelet (here: the test) reports a's pod Ready: a's entry flips, b's stays.
  SetPodReady(a, true);
  EXPECT_TRUE(Eventually([&] {
    return EntryMatches(a, [](const auto* e) { return e != nullptr && e->status == "Ready"; });
  }));
  EXPECT_TRUE(
      EntryMatches(b, [](const auto* e) { return e != nullptr && e->status == "NotReady"; }));
  SetPodReady(a, false);
  EXPECT_TRUE(Eventually([&] {
    return EntryMatches(a, [](const auto* e) { return e != nullptr && e->status == "NotReady"; });
  }));

  // a's pod is deleted (it terminates, as the kubelet would see it): the controller drops its
  // entry; SIGTERM: a stops its IMEX (check fails) and exits 0; b drops a's name.
  ASSERT_TRUE(client_->Delete(k8s::Pod::kResource, ns_, a.pod_name).ok());
  EXPECT_TRUE(
      Eventually([&] { return EntryMatches(a, [](const auto* e) { return e == nullptr; }); }));
  EXPECT_TRUE(EntryMatches(b, [](const auto* e) { return e != nullptr; }));
  EXPECT_EQ(StopDaemon(a, SIGTERM), 0) << ReadFile(a.log()).value_or("");
  EXPECT_NE(Check(a), 0);
  EXPECT_TRUE(Eventually([&] {
    return !absl::StrContains(ReadFile(b.hosts()).value_or(""), HostsLine(a.ip, ia));
  })) << ReadFile(b.hosts()).value_or("");
  // b alone has no peers left: READY again.
  EXPECT_TRUE(Eventually([&] { return Check(b) == 0; }));
  EXPECT_EQ(StopDaemon(b, SIGTERM), 0);
}

TEST_F(DaemonIntegrationTest, RecreatedPodWithNewIpKeepsIndex) {
  SimNode& a = MakeNode("a", "127.0.0.2");
  SimNode& b = MakeNode("b", "127.0.0.3");
  StartDaemon(a);
  StartDaemon(b);
  ASSERT_TRUE(Eventually([&] { return Check(a) == 0 && Check(b) == 0; }))
      << ReadFile(a.log()).value_or("");
  int64_t index_b = -1;
  ASSERT_TRUE(EntryMatches(b, [&](const auto* e) {
    if (e != nullptr) index_b = e->index;
    return e != nullptr;
  }));
  // b dies hard, and comes back on the same node with another IP (the kubelet reports it).
  StopDaemon(b, SIGKILL);
  KillImexChildren(b);
  b.ip = "127.0.0.4";
  SetPodReady(b, false);
  StartDaemon(b);
  ASSERT_TRUE(Eventually([&] {
    return EntryMatches(
        b, [&](const auto* e) { return e != nullptr && e->ip_address == "127.0.0.4"; });
  })) << ReadFile(b.log()).value_or("");
  auto c = Clique();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->daemons.size(), 2u);
  EXPECT_EQ(Entry(*c, b)->index, index_b);
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(ReadFile(a.hosts()).value_or(""), HostsLine("127.0.0.4", index_b));
  }));
  EXPECT_THAT(ReadFile(a.hosts()).value_or(""), Not(HasSubstr("127.0.0.3\t")));
  // a re-resolved through SIGUSR1 and reconnected to b's new address.
  EXPECT_TRUE(Eventually([&] { return Check(a) == 0 && Check(b) == 0; }))
      << ReadFile(a.dir + "/check.out").value_or("");
}

TEST_F(DaemonIntegrationTest, NonFabricNodeOnlyLabelsItsPod) {
  SimNode& a = MakeNode("a", "127.0.0.2");
  StartDaemon(a, "");
  ASSERT_TRUE(Eventually([&] { return Label(a) == ""; })) << ReadFile(a.log()).value_or("");
  EXPECT_EQ(Check(a, ""), 0);
  absl::SleepFor(absl::Seconds(1));
  auto list = client_->List(k8s::ComputeDomainClique::kResource, ns_);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE((*list)["items"].empty());
  EXPECT_FALSE(std::filesystem::exists(a.imexd() + "/imexd.cfg"));
  EXPECT_EQ(StopDaemon(a, SIGTERM), 0);
}

TEST_F(DaemonIntegrationTest, MissingCdiEditsIsFatal) {
  SimNode& a = MakeNode("a", "127.0.0.2");
  cd_uid_ = "";
  StartDaemon(a);
  int status = 0;
  ::waitpid(a.pid, &status, 0);
  a.pid = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_THAT(ReadFile(a.log()).value_or(""),
              HasSubstr("is CDI enabled in your container runtime"));
}

TEST_F(DaemonIntegrationTest, MissingImexBinaryFailsBeforeRegistering) {
  SimNode& a = MakeNode("a", "127.0.0.2");
  imex_binary_ = work_ + "/no-such-nvidia-imex";
  StartDaemon(a);
  int status = 0;
  ::waitpid(a.pid, &status, 0);
  a.pid = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
  EXPECT_THAT(ReadFile(a.log()).value_or(""), HasSubstr("cannot run the IMEX daemon"));
  EXPECT_TRUE(absl::IsNotFound(Clique().status()))
      << "no index taken by a daemon that cannot serve";
}

}  // namespace
}  // namespace dra::cddaemon
