// The gpu-kubelet-plugin binary's process life against the real local control plane: its health
// service and metrics, SIGUSR2 stack dumps, a restart between prepare and unprepare, and kill -9
// in the middle of prepares.

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/common/run_program.h"
#include "lib/gpuplugin/app/plugin_integration_test_fixture.h"
#include "test/support/kubelet_registration.h"

namespace dra::gpu {
namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
using dra::k8s::Client;
using dra::k8s::ResourceClaim;
using dra::k8s::ResourceSlice;
using testing::PluginIntegrationTest;

// grpc.health.v1.Health/Check with an empty request; returns the status field (1 = SERVING).
int HealthStatus(int port) {
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::ByteBuffer request, response;  // empty HealthCheckRequest
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](const grpc::Status& s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  if (!s.ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  // HealthCheckResponse{status = 1}: field 1, varint.
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : -1;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));  // port 0 on loopback: cannot fail
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST_F(PluginIntegrationTest, HealthServiceAndMetricsAreServed) {
  int health_port = FreePort();
  int http_port = FreePort();
  std::string root = tmp_.path() + "/root";
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("t4-2x", root).ok());
  plugin_ = std::make_unique<dra::testing::PluginProcess>(dra::testing::PluginProcessOptions{
      .node_name = node_,
      .driver_root = root,
      .work_dir = tmp_.path(),
      .extra_args = {absl::StrCat("--healthcheck-port=", health_port),
                     absl::StrCat("--http-endpoint=127.0.0.1:", http_port)}});
  plugin_->Start();
  ASSERT_TRUE(plugin_->WaitForSocket());
  // Before the kubelet registered it: NOT_SERVING (2), so its pod is not Ready yet.
  int status = -1;
  for (int i = 0; i < 100 && status == -1; ++i) {
    status = HealthStatus(health_port);
    if (status == -1) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(status, 2) << "grpc.health.v1 before the registration";
  ASSERT_TRUE(dra::testing::NotifyRegistered(plugin_->registration_socket()));
  for (int i = 0; i < 100 && status != 1; ++i) {
    status = HealthStatus(health_port);
    if (status != 1) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(status, 1) << "grpc.health.v1 did not report SERVING";
  std::string uid = AllocatedClaim(node_ + "-h", "gpu-1");
  ASSERT_EQ(Prepare(node_ + "-h", uid), "");
  auto rest = dra::k8s::RestConfig{.server = absl::StrCat("http://127.0.0.1:", http_port)};
  auto metrics_client = Client::Create(rest);
  ASSERT_TRUE(metrics_client.ok());
  auto text = (*metrics_client)->GetRaw("/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text,
              ::testing::HasSubstr(
                  "nvidia_dra_requests_total{driver=\"gpu.nvidia.com\",operation=\"prepare\"} 1"));
  EXPECT_THAT(*text, ::testing::HasSubstr(
                         absl::StrCat("nvidia_dra_prepared_devices{node=\"", node_,
                                      "\",driver=\"gpu.nvidia.com\",device_type=\"gpu\"} 1")));
  // The claim cache is off by default (--claim-informer): the prepare read its claim with a GET.
  EXPECT_THAT(*text, ::testing::Not(::testing::HasSubstr("nvidia_dra_claim_cache_lookups_total")));
  ASSERT_EQ(Unprepare(node_ + "-h", uid), "");
}

// The generated metrics reference (`--help-metrics-markdown`, docs/reference.md) lists exactly
// the families a serving plugin exports, with their types: every option that registers one is on
// (--claim-informer, the health and HTTP endpoints).
TEST_F(PluginIntegrationTest, MetricsReferenceIsWhatTheServingPluginExports) {
  int health_port = FreePort();
  int http_port = FreePort();
  std::string root = tmp_.path() + "/root";
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("t4-2x", root).ok());
  dra::testing::PluginProcessOptions options{
      .node_name = node_,
      .driver_root = root,
      .work_dir = tmp_.path(),
      .extra_args = {"--claim-informer=true", absl::StrCat("--healthcheck-port=", health_port),
                     absl::StrCat("--http-endpoint=127.0.0.1:", http_port)}};
  plugin_ = std::make_unique<dra::testing::PluginProcess>(options);
  plugin_->Start();
  ASSERT_TRUE(plugin_->WaitForSocket()) << "no DRA socket; see " << plugin_->log();
  absl::StatusOr<ProgramResult> reference = RunProgram({options.binary, "--help-metrics-markdown"});
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->exit_code, 0) << reference->stderr_text;
  std::set<std::string> documented;  // "name type", from rows "| `name` | type | labels | help |"
  for (absl::string_view row : absl::StrSplit(reference->stdout_text, '\n')) {
    if (!absl::ConsumePrefix(&row, "| `")) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(row, " | ");
    if (cells.size() < 2) continue;
    documented.insert(absl::StrCat(absl::StripSuffix(cells[0], "`"), " ", cells[1]));
  }
  ASSERT_GT(documented.size(), 5u) << reference->stdout_text;
  // The HTTP endpoint may start after the DRA socket, and the families are registered as the
  // plugin starts: read /metrics until it lists what the reference does, for at most 10 s (a
  // family missing from either side, or an extra one, never gets there).
  auto metrics_client =
      Client::Create(dra::k8s::RestConfig{.server = absl::StrCat("http://127.0.0.1:", http_port)});
  ASSERT_TRUE(metrics_client.ok());
  std::set<std::string> live;  // "name type", from the "# TYPE name type" lines
  std::string last = "(no answer)";
  for (const absl::Time end = absl::Now() + absl::Seconds(10);
       live != documented && absl::Now() < end; absl::SleepFor(absl::Milliseconds(50))) {
    absl::StatusOr<std::string> text = (*metrics_client)->GetRaw("/metrics");
    if (!text.ok()) {
      last = text.status().ToString();
      continue;
    }
    last = *text;
    live.clear();
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (absl::ConsumePrefix(&line, "# TYPE ")) live.insert(std::string(line));
    }
  }
  EXPECT_EQ(documented, live) << "last /metrics read: " << last;
}

// --claim-informer=true: prepare reads a reserved claim of this node from the watch-fed cache (a
// hit, no GET); after its unprepare the same version is not answered from the cache again.
TEST_F(PluginIntegrationTest, ClaimInformerAnswersPrepareFromTheCache) {
  int http_port = FreePort();
  std::string root = tmp_.path() + "/root";
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("t4-2x", root).ok());
  plugin_ = std::make_unique<dra::testing::PluginProcess>(dra::testing::PluginProcessOptions{
      .node_name = node_,
      .driver_root = root,
      .work_dir = tmp_.path(),
      // No device status: its writes (the removal at unprepare is asynchronous) make newer
      // versions of the claim that the watch brings into the cache, and the last check needs the
      // claim to stay at the version it unprepared.
      .extra_args = {"--claim-informer=true", "--device-status=false",
                     absl::StrCat("--http-endpoint=127.0.0.1:", http_port)}});
  plugin_->Start();
  ASSERT_TRUE(plugin_->WaitForSocket()) << "no DRA socket; see " << plugin_->log();
  const std::string name = node_ + "-ci";
  nlohmann::json c = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}}};
  auto created = client_->Create(ResourceClaim::kResource, "default", c);
  ASSERT_TRUE(created.ok()) << created.status();
  claims_.push_back(name);
  // The cache keeps reserved claims only. The consumer is not a pod, so that the claim controller
  // does not drop the reservation of a pod that does not exist.
  (*created)["status"] = {{"allocation",
                           {{"devices",
                             {{"results",
                               {{{"request", "gpu"},
                                 {"driver", "gpu.nvidia.com"},
                                 {"pool", node_},
                                 {"device", "gpu-0"}}}}}}}},
                          {"reservedFor",
                           {{{"apiGroup", "test.nvidia.com"},
                             {"resource", "consumers"},
                             {"name", name},
                             {"uid", "00000000-0000-0000-0000-000000000001"}}}}};
  auto updated = client_->UpdateStatus(ResourceClaim::kResource, "default", *created);
  ASSERT_TRUE(updated.ok()) << updated.status();
  const std::string uid = (*updated)["metadata"]["uid"];
  auto metrics =
      Client::Create(dra::k8s::RestConfig{.server = absl::StrCat("http://127.0.0.1:", http_port)});
  ASSERT_TRUE(metrics.ok());
  // The watch delivers the allocation within milliseconds; a prepare before that is a miss (and a
  // GET), and its unprepare keeps that version out of the cache, so each try that missed writes a
  // newer version (a label) before the next.
  std::string text;
  const std::string hit = "nvidia_dra_claim_cache_lookups_total{result=\"hit\"} 1";
  for (int i = 0; i < 30 && text.find(hit) == std::string::npos; ++i) {
    absl::SleepFor(absl::Milliseconds(200));
    ASSERT_EQ(Prepare(name, uid), "");
    auto got = (*metrics)->GetRaw("/metrics");
    ASSERT_TRUE(got.ok()) << got.status();
    text = *got;
    if (text.find(hit) != std::string::npos) break;
    ASSERT_EQ(Unprepare(name, uid), "");
    ASSERT_TRUE(client_
                    ->MergePatch(ResourceClaim::kResource, "default", name,
                                 {{"metadata", {{"labels", {{"try", absl::StrCat(i)}}}}}})
                    .ok());
  }
  ASSERT_THAT(text, ::testing::HasSubstr(hit));
  ASSERT_EQ(Unprepare(name, uid), "");
  // The unprepared version is not taken again: the next prepare of it is not a hit (a GET).
  ASSERT_EQ(Prepare(name, uid), "");
  auto after = (*metrics)->GetRaw("/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(*after, ::testing::HasSubstr(hit));
  ASSERT_EQ(Unprepare(name, uid), "");
}

TEST_F(PluginIntegrationTest, Sigusr2WritesEveryThreadsStack) {
  StartPlugin("t4-2x");
  const std::string debug_dir = plugin_->plugins_dir() + "/gpu.nvidia.com/debug";
  const std::string dump = debug_dir + "/thread-stacks.dump";
  std::filesystem::remove(dump);
  kill(plugin_->pid(), SIGUSR2);
  for (int i = 0; i < 100 && !std::filesystem::exists(dump); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::ifstream in(dump);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(),
              ::testing::HasSubstr(absl::StrCat("thread stacks of pid ", plugin_->pid())));
  EXPECT_THAT(text.str(), ::testing::HasSubstr("#0 "));
  // Only root may read the stacks or enter the directory.
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(dump).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(debug_dir).permissions(), fs::perms::owner_all);
  // The plugin keeps serving after the dump.
  std::string uid = AllocatedClaim(node_ + "-s", "gpu-0");
  EXPECT_EQ(Prepare(node_ + "-s", uid), "");
  EXPECT_EQ(Unprepare(node_ + "-s", uid), "");
}

TEST_F(PluginIntegrationTest, RestartBetweenPrepareAndUnprepareLosesNothing) {
  StartPlugin("h100-8x");
  std::string uid = AllocatedClaim(node_ + "-r", "gpu-2");
  ASSERT_EQ(Prepare(node_ + "-r", uid), "");
  plugin_->Stop(SIGTERM);
  plugin_->Start();
  ASSERT_TRUE(plugin_->WaitForSocket());
  // Still prepared: a second claim on the same GPU is refused, the spec is still there.
  std::string other = AllocatedClaim(node_ + "-r2", "gpu-2");
  EXPECT_THAT(Prepare(node_ + "-r2", other), ::testing::HasSubstr("already allocated"));
  EXPECT_TRUE(SpecExists(uid));
  ASSERT_EQ(Unprepare(node_ + "-r", uid), "");
  EXPECT_FALSE(SpecExists(uid));
  EXPECT_EQ(Prepare(node_ + "-r2", other), "");
}

TEST_F(PluginIntegrationTest, KillDuringPrepareThenRetryIsConsistent) {
  StartPlugin("h100-8x");
  std::mt19937 rng(42);
  for (int i = 0; i < 12; ++i) {
    SCOPED_TRACE(i);
    std::string name = absl::StrCat(node_, "-k", i);
    std::string uid = AllocatedClaim(name, absl::StrCat("gpu-", i % 8));
    // Fire the prepare and kill the plugin somewhere inside it (0..4 ms in).
    std::thread caller([&] { (void)Prepare(name, uid); });
    absl::SleepFor(absl::Microseconds(rng() % 4000));
    plugin_->Stop(SIGKILL);
    caller.join();
    plugin_->Start();
    ASSERT_TRUE(plugin_->WaitForSocket());
    // The kubelet retries; the retry must succeed and leave exactly one consistent record.
    ASSERT_EQ(Prepare(name, uid), "");
    EXPECT_TRUE(SpecExists(uid));
    ASSERT_EQ(Unprepare(name, uid), "");
    EXPECT_FALSE(SpecExists(uid));
  }
  // The startup cleanup (under the prep lock) removes temporary files of killed writes.
  auto leftovers = [&] {
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator(plugin_->cdi_dir())) {
      left.push_back(e.path().filename());
    }
    return left;
  };
  for (int i = 0; i < 100 && !leftovers().empty(); ++i) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_THAT(leftovers(), ::testing::IsEmpty());
  plugin_->Stop(SIGTERM);
  auto cp = checkpoint::Checkpoint::Open(plugin_->data_dir());
  ASSERT_TRUE(cp.ok()) << cp.status();
  auto all = (*cp)->List();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

}  // namespace
}  // namespace dra::gpu
