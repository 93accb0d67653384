// The compute-domain-kubelet-plugin binary against the local control plane and a gb200-4x mock
// driver root: the slice it publishes, a daemon claim's CDI spec, a channel claim held back until
// a ComputeDomainClique marks this node's daemon Ready, allocationMode All, and the node label
// coming and going; in hostManaged mode, a slice without daemon-0 and a channel claim held back
// until a fake host nvidia-imex answers on its unix socket. Everything lives in a fake Node and two
// namespaces of this test, removed at the end.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "lib/cdi/spec.h"
#include "lib/common/atomic_file.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/rest_config.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "test/doubles/mock-nvml/caps_minors.h"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/build_paths.h"
#include "test/support/crds.h"
#include "test/support/kubelet_registration.h"
#include "test/support/plugin_process.h"

namespace dra::cdplugin {
namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace fs = std::filesystem;
using dra::k8s::Client;
using dra::k8s::ResourceClaim;
using dra::k8s::ResourceSlice;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kDriver[] = "compute-domain.nvidia.com";
constexpr char kClique[] = "dd6ffbfa-8abc-4492-a855-efc01b31186c.7";
const k8s::ResourceInfo kNamespace{"", "v1", "Namespace", "namespaces", false};

// grpc.health.v1.Health/Check with an empty request; returns the status field (1 = SERVING).
int HealthStatus(int port) {
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](const grpc::Status& s) { done.set_value(s); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : -1;  // field 1, varint
}

// A port that nothing listens on, from below the kernel's ephemeral range (32768-60999 by
// default): a port handed out by bind(0) is ephemeral, and between the test's check and the
// plugin's bind an outgoing connection of any process on this busy machine (the API server's
// clients, the kubelets) may take it, failing the plugin with EADDRINUSE. Each call returns
// another port.
int FreePort() {
  static int next = 20000 + static_cast<int>(getpid() % 5000);
  for (int tries = 0; tries < 5000; ++tries) {
    const int port = next;
    next = next + 1 < 30000 ? next + 1 : 20000;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

class CdPluginIntegrationTest : public ::testing::Test {
 protected:
  // The ComputeDomain CRDs: every run starts from an empty control plane.
  static void SetUpTestSuite() {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }

  void SetUp() override {
    auto cfg = k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    client_ = std::move(*Client::Create(*cfg, {.qps = 0}));
    const std::string id = absl::StrCat(getpid(), "-", ++counter_);
    node_ = "cd-plugin-it-" + id;
    user_ns_ = "cd-plugin-it-user-" + id;
    driver_ns_ = "cd-plugin-it-driver-" + id;
    ASSERT_TRUE(
        client_
            ->Create(k8s::Node::kResource, "",
                     {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node_}}}})
            .ok());
    for (const std::string& ns : {user_ns_, driver_ns_}) {
      ASSERT_TRUE(
          client_
              ->Create(kNamespace, "",
                       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());
    }
    auto cd = client_->Create(
        k8s::ComputeDomain::kResource, user_ns_,
        {{"apiVersion", "resource.nvidia.com/v1beta1"},
         {"kind", "ComputeDomain"},
         {"metadata", {{"name", "domain"}, {"namespace", user_ns_}}},
         {"spec", {{"numNodes", 0}, {"channel", {{"resourceClaimTemplate", {{"name", "ch"}}}}}}}});
    ASSERT_TRUE(cd.ok()) << cd.status();
    cd_uid_ = (*cd)["metadata"]["uid"];

    const std::string root = this->root();
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot("gb200-4x", root).ok());
    for (const char* name : {"nvidia-imex", "nvidia-imex-ctl"}) {  // unless the fakes were built
      if (!fs::exists(root + "/usr/bin/" + name)) {
        ASSERT_TRUE(WriteFileAtomically(root + "/usr/bin/" + name, "#!/bin/sh\n", 0755).ok());
      }
    }
    plugin_ = std::make_unique<dra::testing::PluginProcess>(dra::testing::PluginProcessOptions{
        .binary = dra::testing::BinaryDir() +
                  "/cmd/compute-domain-kubelet-plugin/compute-domain-kubelet-plugin",
        .node_name = node_,
        .driver_root = root,
        .work_dir = tmp_.path(),
        .extra_args = ExtraArgs(),
        .driver_name = kDriver});
    plugin_->Start();
    ASSERT_TRUE(plugin_->WaitForSocket()) << "no DRA socket; see " << plugin_->log();
  }

  virtual std::vector<std::string> ExtraArgs() {
    return {"--namespace=" + driver_ns_, "-v=2", absl::StrCat("--healthcheck-port=", health_port_),
            absl::StrCat("--http-endpoint=127.0.0.1:", http_port_)};
  }
  std::string root() const { return tmp_.path() + "/root"; }

  void TearDown() override {
    plugin_.reset();
    auto slices = client_->ListAll(ResourceSlice::kResource, "",
                                   {.field_selector = "spec.nodeName=" + node_});
    if (slices.ok()) {
      for (const auto& s : (*slices)["items"]) {
        (void)client_->Delete(ResourceSlice::kResource, "", s["metadata"]["name"]);
      }
    }
    for (const std::string& ns : {user_ns_, driver_ns_}) (void)client_->Delete(kNamespace, "", ns);
    (void)client_->Delete(k8s::Node::kResource, "", node_);
    if (HasFailure()) {
      auto log = ReadFile(plugin_log_);
      if (log.ok()) std::cerr << "plugin log:\n" << *log << "\n";
    }
  }

  // A claim in `ns`, allocated through the status subresource as the scheduler would.
  std::string AllocatedClaim(const std::string& ns, const std::string& name,
                             const std::string& device, const nlohmann::json& params) {
    const std::string request = device.rfind("channel", 0) == 0 ? "channel" : "daemon";
    nlohmann::json c = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", request},
               {"exactly",
                {{"deviceClassName", "compute-domain-default-channel.nvidia.com"}}}}}}}}}}};
    auto created = client_->Create(ResourceClaim::kResource, ns, c);
    EXPECT_TRUE(created.ok()) << created.status();
    (*created)["status"] = {
        {"allocation",
         {{"devices",
           {{"results",
             {{{"request", request}, {"driver", kDriver}, {"pool", node_}, {"device", device}}}},
            {"config",
             {{{"source", "FromClaim"},
               {"requests", {request}},
               {"opaque", {{"driver", kDriver}, {"parameters", params}}}}}}}}}}};
    auto updated = client_->UpdateStatus(ResourceClaim::kResource, ns, *created);
    EXPECT_TRUE(updated.ok()) << updated.status();
    return (*updated)["metadata"]["uid"];
  }
  nlohmann::json Config(const std::string& kind, const std::string& mode = "") {
    nlohmann::json j = {
        {"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", kind}, {"domainID", cd_uid_}};
    if (!mode.empty()) j["allocationMode"] = mode;
    return j;
  }

  std::unique_ptr<drapb::DRAPlugin::Stub> Stub() {
    return drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix://" + plugin_->socket(), grpc::InsecureChannelCredentials()));
  }
  // The claim's error ("" on success) or the gRPC error.
  std::string Prepare(const std::string& ns, const std::string& name, const std::string& uid,
                      std::vector<std::string>* cdi_ids, int deadline_s = 45) {
    drapb::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_(ns);
    c->set_name(name);
    c->set_uid(uid);
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
    grpc::Status s = Stub()->NodePrepareResources(&ctx, req, &resp);
    if (!s.ok()) return "grpc: " + s.error_message();
    if (!resp.claims().contains(uid)) return "no result for claim";
    const auto& r = resp.claims().at(uid);
    for (const auto& d : r.devices()) {
      for (const auto& id : d.cdi_device_ids()) cdi_ids->push_back(id);
    }
    return r.error();
  }
  std::string Unprepare(const std::string& ns, const std::string& name, const std::string& uid) {
    drapb::NodeUnprepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_(ns);
    c->set_name(name);
    c->set_uid(uid);
    drapb::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
    grpc::Status s = Stub()->NodeUnprepareResources(&ctx, req, &resp);
    if (!s.ok()) return "grpc: " + s.error_message();
    return resp.claims().at(uid).error();
  }
  cdi::Spec Spec(const std::string& uid) {
    auto text =
        ReadFile(plugin_->cdi_dir() + "/k8s.compute-domain.nvidia.com-claim_" + uid + ".json");
    EXPECT_TRUE(text.ok()) << text.status();
    auto spec = cdi::DecodeSpec(text.ok() ? *text : "{}");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? *spec : cdi::Spec();
  }
  std::string NodeLabel() {
    auto node = client_->Get(k8s::Node::kResource, "", node_);
    EXPECT_TRUE(node.ok());
    return node->value("metadata", nlohmann::json::object())
        .value("labels", nlohmann::json::object())
        .value(std::string(k8s::kComputeDomainLabel), "");
  }

  static inline int counter_ = 0;
  const int health_port_ = FreePort();
  const int http_port_ = FreePort();
  dra::testing::TempDir tmp_;
  std::string plugin_log_ = tmp_.path() + "/plugin.log";
  std::unique_ptr<Client> client_;
  std::unique_ptr<dra::testing::PluginProcess> plugin_;
  std::string node_, user_ns_, driver_ns_, cd_uid_;
};

TEST_F(CdPluginIntegrationTest, DaemonAndChannelClaimsThroughTheCliqueReadinessGate) {
  // The slice: one pool named after the node, channel-0 and daemon-0.
  std::vector<ResourceSlice> slices;
  for (int i = 0; i < 1000 && slices.empty(); ++i) {
    auto list = client_->ListAll(ResourceSlice::kResource, "",
                                 {.field_selector = "spec.nodeName=" + node_});
    if (list.ok()) {
      for (const auto& item : (*list)["items"]) slices.push_back(*ResourceSlice::FromJson(item));
    }
    if (slices.empty()) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].spec.driver, kDriver);
  EXPECT_EQ(slices[0].spec.pool.name, node_);
  ASSERT_EQ(slices[0].spec.devices.size(), 2u);
  EXPECT_EQ(slices[0].spec.devices[0].name, "channel-0");
  EXPECT_EQ(slices[0].spec.devices[0].attributes.at("type").string_value, "channel");
  EXPECT_EQ(slices[0].spec.devices[0].attributes.at("id").int_value, 0);
  EXPECT_EQ(slices[0].spec.devices[1].name, "daemon-0");
  EXPECT_EQ(slices[0].spec.devices[1].attributes.at("type").string_value, "daemon");

  // The daemon claim.
  const std::string daemon_uid =
      AllocatedClaim(driver_ns_, "daemon", "daemon-0", Config("ComputeDomainDaemonConfig"));
  std::vector<std::string> ids;
  ASSERT_EQ(Prepare(driver_ns_, "daemon", daemon_uid, &ids), "");
  EXPECT_THAT(ids, ElementsAre("k8s.compute-domain.nvidia.com/device=all",
                               "k8s.compute-domain.nvidia.com/claim=" + daemon_uid + "-daemon-0"));
  EXPECT_TRUE(fs::exists(plugin_->cdi_dir() + "/k8s.compute-domain.nvidia.com-device_base.json"));
  {
    cdi::Spec spec = Spec(daemon_uid);
    ASSERT_EQ(spec.devices.size(), 1u);
    const cdi::ContainerEdits& e = spec.devices[0].container_edits;
    EXPECT_THAT(e.env,
                ElementsAre(absl::StrCat("CLIQUE_ID=", kClique), "COMPUTE_DOMAIN_UUID=" + cd_uid_,
                            "COMPUTE_DOMAIN_NAME=domain", "COMPUTE_DOMAIN_NAMESPACE=" + user_ns_));
    ASSERT_EQ(e.mounts.size(), 3u);
    EXPECT_EQ(e.mounts[0].host_path, plugin_->data_dir() + "/domains/" + cd_uid_);
    EXPECT_EQ(e.mounts[0].container_path, "/imexd");
    EXPECT_EQ(e.mounts[1].container_path, "/usr/bin/nvidia-imex");
    EXPECT_EQ(e.mounts[2].container_path, "/usr/bin/nvidia-imex-ctl");
    ASSERT_EQ(e.device_nodes.size(), 1u);
    EXPECT_EQ(e.device_nodes[0].path, "/dev/nvidia-caps/nvidia-cap0");
    EXPECT_TRUE(fs::exists(plugin_->data_dir() + "/domains/" + cd_uid_ + "/imexd.cfg.tmpl"));
  }

  // A restarted plugin answers the prepared claim from its checkpoint.
  plugin_->Stop();
  plugin_->Start();
  ASSERT_TRUE(plugin_->WaitForSocket()) << "no DRA socket after the restart";
  std::vector<std::string> again;
  ASSERT_EQ(Prepare(driver_ns_, "daemon", daemon_uid, &again), "");
  EXPECT_EQ(again, ids);

  // The channel claim: not ready (no clique yet), but the node is labelled for the daemon.
  const std::string channel_uid =
      AllocatedClaim(user_ns_, "channel", "channel-0", Config("ComputeDomainChannelConfig"));
  ids.clear();
  EXPECT_THAT(Prepare(user_ns_, "channel", channel_uid, &ids, /*deadline_s=*/4),
              HasSubstr("current node not ready in ComputeDomain"));
  EXPECT_EQ(NodeLabel(), cd_uid_);
  // A prepare waiting inside its call is released by the daemon becoming Ready.
  const absl::Time released_after = absl::Now() + absl::Seconds(1);
  auto waiting = std::async(std::launch::async, [&] {
    std::vector<std::string> got;
    std::string err = Prepare(user_ns_, "channel", channel_uid, &got);
    EXPECT_GE(absl::Now(), released_after);  // it waited for the clique
    return std::pair{err, got};
  });
  absl::SleepFor(absl::Seconds(1));
  auto clique = client_->Create(
      k8s::ComputeDomainClique::kResource, driver_ns_,
      {{"apiVersion", "resource.nvidia.com/v1beta1"},
       {"kind", "ComputeDomainClique"},
       {"metadata", {{"name", k8s::CliqueObjectName(cd_uid_, kClique)}, {"namespace", driver_ns_}}},
       {"daemons",
        {{{"nodeName", node_},
          {"ipAddress", "10.1.2.3"},
          {"cliqueID", kClique},
          {"index", 0},
          {"status", "Ready"}}}}});
  ASSERT_TRUE(clique.ok()) << clique.status();
  auto [err, got] = waiting.get();
  ASSERT_EQ(err, "");
  EXPECT_THAT(got,
              ElementsAre("k8s.compute-domain.nvidia.com/claim=" + channel_uid + "-channel-0"));
  {
    cdi::Spec spec = Spec(channel_uid);
    ASSERT_EQ(spec.devices.size(), 1u);
    const auto& nodes = spec.devices[0].container_edits.device_nodes;
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_EQ(nodes[0].path, "/dev/nvidia-caps-imex-channels/channel0");
    EXPECT_EQ(nodes[0].major, mock_nvml::kNvidiaCapsImexChannelsMajor);
  }

  // Unprepare removes the label; the All claim then gets every channel.
  EXPECT_EQ(Unprepare(user_ns_, "channel", channel_uid), "");
  EXPECT_EQ(NodeLabel(), "");
  EXPECT_FALSE(fs::exists(plugin_->cdi_dir() + "/k8s.compute-domain.nvidia.com-claim_" +
                          channel_uid + ".json"));
  const std::string all_uid =
      AllocatedClaim(user_ns_, "all", "channel-0", Config("ComputeDomainChannelConfig", "All"));
  ids.clear();
  ASSERT_EQ(Prepare(user_ns_, "all", all_uid, &ids), "");
  EXPECT_EQ(NodeLabel(), cd_uid_);
  {
    cdi::Spec spec = Spec(all_uid);
    ASSERT_EQ(spec.devices.size(), 1u);
    const auto& nodes = spec.devices[0].container_edits.device_nodes;
    ASSERT_EQ(nodes.size(), 2048u);
    EXPECT_EQ(nodes[2047].path, "/dev/nvidia-caps-imex-channels/channel2047");
  }
  EXPECT_EQ(Unprepare(user_ns_, "all", all_uid), "");
  EXPECT_EQ(NodeLabel(), "");
  EXPECT_EQ(Unprepare(driver_ns_, "daemon", daemon_uid), "");
  EXPECT_EQ(Unprepare(driver_ns_, "daemon", daemon_uid), "");  // idempotent

  // Metrics (counted since the restart above) and the gRPC health port.
  auto metrics_client =
      Client::Create(k8s::RestConfig{.server = absl::StrCat("http://127.0.0.1:", http_port_)});
  ASSERT_TRUE(metrics_client.ok());
  auto text = (*metrics_client)->GetRaw("/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("nvidia_dra_requests_total{driver=\"compute-domain.nvidia.com\","
                               "operation=\"prepare\"} 3"));
  EXPECT_THAT(*text, HasSubstr("nvidia_dra_requests_total{driver=\"compute-domain.nvidia.com\","
                               "operation=\"unprepare\"} 4"));
  EXPECT_THAT(*text, HasSubstr("nvidia_dra_node_prepare_errors_total{driver=\"compute-domain."
                               "nvidia.com\",error_type=\"prepare_devices\"} 1"));
  EXPECT_THAT(*text, HasSubstr(absl::StrCat("nvidia_dra_prepared_devices{node=\"", node_,
                                            "\",driver=\"compute-domain.nvidia.com\","
                                            "device_type=\"channel\"} 0")));
  // Healthy only once the kubelet (here: the test) has registered the plugin.
  EXPECT_EQ(HealthStatus(health_port_), 2);
  ASSERT_TRUE(dra::testing::NotifyRegistered(plugin_->registration_socket()));
  EXPECT_EQ(HealthStatus(health_port_), 1);
}

TEST_F(CdPluginIntegrationTest, UnknownConfigFieldFailsAtOnce) {
  nlohmann::json params = Config("ComputeDomainChannelConfig");
  params["unexpectedField"] = "x";
  const std::string uid = AllocatedClaim(user_ns_, "bad", "channel-0", params);
  std::vector<std::string> ids;
  const absl::Time start = absl::Now();
  std::string err = Prepare(user_ns_, "bad", uid, &ids);
  EXPECT_THAT(err, HasSubstr("unknown field \"unexpectedField\""));
  EXPECT_THAT(err, HasSubstr("permanent error"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(NodeLabel(), "");
}

// --imex-mode=hostManaged: the "host" IMEX daemon is the fake nvidia-imex serving its command
// channel on <mock root>/etc/nvidia-imex/imex_ctrl.sock (the mock root has a /dev, so it is the
// dev root), queried by the mock root's fake nvidia-imex-ctl.
// A checkpoint found corrupt while the plugin serves gets the policy both kubelet plugins share
// (lib/kubeletplugin/plugin_host.h, docs/checkpoint-format.md "Corruption"): counted, a Warning
// Event CheckpointCorrupt on the Node, and a cleanup pass at once, long before --cleanup-interval
// (10 min): here it removes the directory of a ComputeDomain that does not exist.
TEST_F(CdPluginIntegrationTest, CorruptCheckpointWhileServingIsReportedAndStartsACleanupPass) {
  const std::string stale = plugin_->data_dir() + "/domains/00000000-0000-4000-8000-00000000dead";
  fs::create_directories(stale);
  const std::string checkpoint = plugin_->data_dir() + "/checkpoint.json";
  ASSERT_TRUE(WriteFileAtomically(checkpoint, "{not json", 0600).ok());  // a new inode: read again

  // An unprepare reads the checkpoint: the corrupt file is moved aside, the call succeeds.
  EXPECT_EQ(Unprepare(user_ns_, "gone", "00000000-0000-4000-8000-000000000001"), "");
  bool moved_aside = false;
  for (const auto& e : fs::directory_iterator(plugin_->data_dir())) {
    moved_aside |= e.path().filename().string().rfind("checkpoint.json.corrupt-", 0) == 0;
  }
  EXPECT_TRUE(moved_aside);

  auto metrics_client =
      Client::Create(k8s::RestConfig{.server = absl::StrCat("http://127.0.0.1:", http_port_)});
  ASSERT_TRUE(metrics_client.ok());
  auto text = (*metrics_client)->GetRaw("/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("nvidia_dra_checkpoint_corruptions_total 1"));

  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool event = false;
  while (!(event && !fs::exists(stale)) && absl::Now() < deadline) {
    auto events = client_->ListAll(
        k8s::Event::kResource, "default",
        {.field_selector = absl::StrCat("involvedObject.kind=Node,involvedObject.name=", node_,
                                        ",reason=CheckpointCorrupt")});
    ASSERT_TRUE(events.ok()) << events.status();
    for (const auto& e : (*events)["items"]) {
      event |= e.value("message", "")
                   .find(
                       "compute-domain claims prepared before are no longer "
                       "known") != std::string::npos;
    }
    absl::SleepFor(absl::Milliseconds(200));  // polling the API server and the directory
  }
  EXPECT_TRUE(event) << "no CheckpointCorrupt event on Node " << node_;
  EXPECT_FALSE(fs::exists(stale)) << "no cleanup pass removed " << stale;
}

class CdPluginHostManagedTest : public CdPluginIntegrationTest {
 protected:
  std::vector<std::string> ExtraArgs() override {
    std::vector<std::string> args = CdPluginIntegrationTest::ExtraArgs();
    args.push_back("--imex-mode=hostManaged");
    args.push_back("--feature-gates=HostManagedIMEXDaemon=true");
    args.push_back("--imex-host-socket-path=/etc/nvidia-imex/imex_ctrl.sock");
    return args;
  }
  void TearDown() override {
    StopHostImex();
    CdPluginIntegrationTest::TearDown();
  }
  void StartHostImex() {
    const std::string dir = tmp_.path() + "/host-imex";
    ASSERT_TRUE(MakeDirectories(dir, 0755).ok());
    ASSERT_TRUE(MakeDirectories(root() + "/etc/nvidia-imex", 0755).ok());
    ASSERT_TRUE(WriteFileAtomically(dir + "/nodes.cfg", "127.0.0.1\n").ok());
    ASSERT_TRUE(WriteFileAtomically(
                    dir + "/imex.cfg",
                    absl::StrCat("SERVER_PORT=", FreePort(), "\nIMEX_NODE_CONFIG_FILE=", dir,
                                 "/nodes.cfg\nIMEX_CMD_BIND_INTERFACE_IP=127.0.0.1\nIMEX_CMD_PORT=",
                                 FreePort(), "\nIMEX_CMD_UNIX_DOMAIN_PATH=", root(),
                                 "/etc/nvidia-imex/imex_ctrl.sock\n"))
                    .ok());
    const std::string binary = dra::testing::BinaryDir() + "/test/doubles/imex/nvidia-imex";
    const std::string config = dir + "/imex.cfg", log = dir + "/imex.log";
    imex_pid_ = fork();
    if (imex_pid_ == 0) {
      (void)freopen(log.c_str(), "w", stderr);
      execl(binary.c_str(), "nvidia-imex", "-c", config.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && !fs::exists(root() + "/etc/nvidia-imex/imex_ctrl.sock"); ++i) {
      usleep(50 * 1000);
    }
    ASSERT_TRUE(fs::exists(root() + "/etc/nvidia-imex/imex_ctrl.sock"))
        << ReadFile(log).value_or("");
  }
  void StopHostImex() {
    if (imex_pid_ <= 0) return;
    kill(imex_pid_, SIGTERM);
    waitpid(imex_pid_, nullptr, 0);
    imex_pid_ = -1;
  }
  pid_t imex_pid_ = -1;
};

TEST_F(CdPluginHostManagedTest, OnlyChannelZeroAndChannelsWaitForTheHostDaemon) {
  std::vector<std::string> names;
  for (int i = 0; i < 100 && names.empty(); ++i) {
    auto list = client_->ListAll(ResourceSlice::kResource, "",
                                 {.field_selector = "spec.nodeName=" + node_});
    ASSERT_TRUE(list.ok()) << list.status();
    for (const auto& item : (*list)["items"]) {
      for (const auto& d : item["spec"]["devices"]) names.push_back(d["name"]);
    }
    if (names.empty()) usleep(100 * 1000);
  }
  EXPECT_THAT(names, ElementsAre("channel-0"));

  // No host daemon: retryable, returned before the call's deadline with the ctl's output.
  const std::string uid =
      AllocatedClaim(user_ns_, "w", "channel-0", Config("ComputeDomainChannelConfig"));
  std::vector<std::string> ids;
  std::string err = Prepare(user_ns_, "w", uid, &ids, /*deadline_s=*/6);
  EXPECT_THAT(err, HasSubstr("host-managed IMEX daemon not ready"));
  EXPECT_THAT(err, HasSubstr("--u=" + root() + "/etc/nvidia-imex/imex_ctrl.sock"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("permanent error")));

  StartHostImex();
  ids.clear();
  err = Prepare(user_ns_, "w", uid, &ids);
  EXPECT_EQ(err, "");
  EXPECT_THAT(ids,
              ElementsAre(absl::StrCat("k8s.compute-domain.nvidia.com/claim=", uid, "-channel-0")));
  const cdi::Spec spec = Spec(uid);
  ASSERT_EQ(spec.devices.size(), 1u);
  ASSERT_EQ(spec.devices[0].container_edits.device_nodes.size(), 1u);
  EXPECT_EQ(spec.devices[0].container_edits.device_nodes[0].path,
            "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_EQ(NodeLabel(), "");
  EXPECT_EQ(Unprepare(user_ns_, "w", uid), "");

  const std::string daemon =
      AllocatedClaim(driver_ns_, "d", "daemon-0", Config("ComputeDomainDaemonConfig"));
  ids.clear();
  err = Prepare(driver_ns_, "d", daemon, &ids);
  EXPECT_THAT(err, HasSubstr("ComputeDomain daemon claims are not supported when "
                             "imex.mode=hostManaged"));
  EXPECT_THAT(err, HasSubstr("permanent error"));
}

}  // namespace
}  // namespace dra::cdplugin
