#include "lib/gpuplugin/mps/mps_daemon.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"
#include "lib/gpuplugin/mps/mps_daemon_template.h"
#include "lib/gpuplugin/mps/mps_host.h"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/canned_http_server.h"

namespace dra::gpu {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kClaim[] = "0b6d2f8e-4a1c-4d7e-9f00-123456789abc";
constexpr char kGpu[] = "GPU-11111111-2222-3333-4444-555555555555";
constexpr char kMig[] = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

// A clock whose sleeps pass at once, so that retry loops run to their end without waiting.
class InstantClock final : public Clock {
 public:
  absl::Time Now() override { return now_; }
  void SleepFor(absl::Duration d) override {
    if (d > absl::ZeroDuration()) now_ += d;
    sleeps.push_back(d);
  }
  bool AwaitWithDeadline(absl::Mutex*, const absl::Condition& cond, absl::Time) override {
    return cond.Eval();
  }
  std::vector<absl::Duration> sleeps;

 private:
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
};

// Mounts recorded in memory.
struct FakeMounts {
  std::map<std::string, int> depth;  // path -> how many times mounted
  std::vector<std::string> calls;

  MountOps Ops() {
    MountOps ops;
    ops.is_mount_point = [this](const std::string& p) -> absl::StatusOr<bool> {
      return depth[p] > 0;
    };
    ops.mount_tmpfs = [this](const std::string& source, const std::string& target,
                             const std::string& options) {
      calls.push_back("mount " + source + " " + target + " " + options);
      ++depth[target];
      return absl::OkStatus();
    };
    ops.unmount = [this](const std::string& target) {
      calls.push_back("unmount " + target);
      --depth[target];
      return absl::OkStatus();
    };
    return ops;
  }
};

class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteFileAtomically(meminfo_, "MemTotal:        1000 kB\nMemFree: 10 kB\n").ok());
    dummy_ = ClientFor(unused_server_);
  }

  MpsDaemonEnv Env(k8s::Client* client) {
    MpsDaemonEnv env;
    env.node_name = "node-a";
    env.ns = "gpu-driver";
    env.image = "registry.example/dra:v1";
    env.host_driver_root = "/run/nvidia/driver";
    env.container_driver_root = tmp_.path() + "/driver-root";
    env.plugin_data_dir = tmp_.path() + "/plugin";
    env.feature_gates = "MPSSupport=true,TimeSlicingSettings=false";
    env.client = client;
    env.set_compute_mode = [this](const std::string& uuid, absl::string_view mode) {
      compute_modes_.push_back(uuid + "=" + std::string(mode));
      return absl::OkStatus();
    };
    env.mounts = mounts_.Ops();
    env.clock = &clock_;
    env.meminfo_path = meminfo_;
    return env;
  }

  static MpsDaemonGroup Group() {
    MpsDaemonGroup g;
    g.claim_uid = kClaim;
    g.device_uuids = {kMig, kGpu};
    g.full_gpu_uuids = {kGpu};
    g.config.default_active_thread_percentage = 50;
    g.pinned_memory_limits_mib = {{kGpu, 1024}, {kMig, 512}};
    return g;
  }

  std::unique_ptr<k8s::Client> ClientFor(const dra::testing::CannedHttpServer& server) {
    k8s::RestConfig cfg;
    cfg.server = server.url();
    k8s::ClientOptions options;
    options.max_retries = 0;
    auto c = k8s::Client::Create(cfg, options);
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }

  std::unique_ptr<MpsControlDaemon> Daemon(k8s::Client* client, MpsDaemonGroup g = Group()) {
    auto d = MpsControlDaemon::Create(Env(client), std::move(g));
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  dra::testing::TempDir tmp_;
  std::string meminfo_ = tmp_.path() + "/meminfo";
  FakeMounts mounts_;
  InstantClock clock_;
  std::vector<std::string> compute_modes_;
  // For tests that make no API call.
  dra::testing::CannedHttpServer unused_server_{{{500, "{}"}}};
  std::unique_ptr<k8s::Client> dummy_;
};

TEST(MpsDaemonIdTest, ClaimUidAndFirstFiveHexOfTheSortedUuids) {
  // sha256("GPU-1111...,MIG-aaaa...") starts with 84255 (python3 hashlib).
  EXPECT_EQ(MpsDaemonId(kClaim, {kMig, kGpu}), std::string(kClaim) + "-84255");
  EXPECT_EQ(MpsDaemonId(kClaim, {kGpu, kMig}), std::string(kClaim) + "-84255");
  EXPECT_EQ(MpsDaemonId("u", {"GPU-a"}), "u-0afda");
  EXPECT_EQ(MpsDeploymentName("u-0afda"), "mps-control-daemon-u-0afda");
  EXPECT_EQ(MpsDaemonDir("/var/lib/kubelet/plugins/gpu.nvidia.com", "u-0afda"),
            "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/u-0afda");
}

TEST_F(MpsDaemonTest, CreateRejectsValuesThatWouldReachTheShell) {
  struct Case {
    const char* name;
    std::function<void(MpsDaemonGroup&)> edit;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"uuid with a space", [](MpsDaemonGroup& g) { g.device_uuids.push_back("GPU-1 ;rm"); },
       "device UUID"},
      {"uuid with $", [](MpsDaemonGroup& g) { g.device_uuids.push_back("GPU-$(x)"); },
       "device UUID"},
      {"claim uid", [](MpsDaemonGroup& g) { g.claim_uid = "a b"; }, "claim UID"},
      {"no devices", [](MpsDaemonGroup& g) { g.device_uuids.clear(); }, "no devices"},
      {"full gpu outside the group", [](MpsDaemonGroup& g) { g.full_gpu_uuids = {"GPU-x"}; },
       "full GPU UUID"},
      {"percentage", [](MpsDaemonGroup& g) { g.config.default_active_thread_percentage = 101; },
       "defaultActiveThreadPercentage"},
      {"limit of a foreign device",
       [](MpsDaemonGroup& g) { g.pinned_memory_limits_mib["GPU-x"] = 1; },
       "pinned memory limit device"},
      {"zero limit", [](MpsDaemonGroup& g) { g.pinned_memory_limits_mib[kGpu] = 0; },
       "at least 1 MiB"},
  };
  for (const Case& c : cases) {
    MpsDaemonGroup g = Group();
    c.edit(g);
    auto with_client = MpsControlDaemon::Create(Env(dummy_.get()), g);
    ASSERT_FALSE(with_client.ok()) << c.name;
    EXPECT_EQ(with_client.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(with_client.status().message(), HasSubstr(c.want)) << c.name;
  }
  // Old-style MIG UUIDs carry slashes.
  MpsDaemonGroup g = Group();
  g.device_uuids.push_back("MIG-GPU-11111111-2222-3333-4444-555555555555/1/0");
  EXPECT_TRUE(MpsControlDaemon::Create(Env(dummy_.get()), g).ok());
}

json EnvOf(const json& container, const std::string& name) {
  for (const json& e : container["env"]) {
    if (e["name"] == name) return e["value"];
  }
  return nullptr;
}

TEST_F(MpsDaemonTest, RendersTheDeploymentWithExactFields) {
  auto d = Daemon(dummy_.get());
  ASSERT_NE(d, nullptr);
  absl::StatusOr<json> dep = d->RenderDeployment();
  ASSERT_TRUE(dep.ok()) << dep.status();
  const std::string id = std::string(kClaim) + "-84255";
  const std::string name = "mps-control-daemon-" + id;
  const std::string dir = tmp_.path() + "/plugin/mps/" + id;
  EXPECT_EQ((*dep)["apiVersion"], "apps/v1");
  EXPECT_EQ((*dep)["kind"], "Deployment");
  EXPECT_EQ((*dep)["metadata"]["name"], name);
  EXPECT_EQ((*dep)["metadata"]["namespace"], "gpu-driver");
  EXPECT_EQ((*dep)["metadata"]["labels"]["app"], name);
  EXPECT_EQ((*dep)["metadata"]["annotations"]["resource.nvidia.com/claim-uid"], kClaim);
  const json& spec = (*dep)["spec"];
  EXPECT_EQ(spec["replicas"], 1);
  EXPECT_EQ(spec["selector"], json({{"matchLabels", {{"app", name}}}}));
  EXPECT_EQ(spec["template"]["metadata"]["labels"]["app"], name);
  const json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["nodeName"], "node-a");
  EXPECT_EQ(pod["hostPID"], true);
  // Nothing in the daemon calls the API: the service account's token is not mounted.
  EXPECT_EQ(pod.value("automountServiceAccountToken", true), false);
  // Unset flags leave their fields out.
  EXPECT_FALSE(pod.contains("serviceAccountName"));
  EXPECT_FALSE(pod.contains("imagePullSecrets"));
  ASSERT_EQ(pod["containers"].size(), 1u);
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["name"], "mps-control-daemon");
  EXPECT_EQ(c["image"], "registry.example/dra:v1");
  EXPECT_FALSE(c.contains("imagePullPolicy"));
  EXPECT_EQ(c["securityContext"]["privileged"], true);
  EXPECT_EQ(c["command"], json({"sh", "-c"}));
  ASSERT_EQ(c["args"].size(), 1u);
  const std::string script = c["args"][0];
  EXPECT_THAT(script, HasSubstr("rm -f \"$logs/startup.log\""));
  EXPECT_THAT(script, HasSubstr("RUN=\"chroot /driver-root sh -c\""));
  EXPECT_THAT(script, HasSubstr("$RUN \"nvidia-cuda-mps-control -d $MPS_DAEMON_ARGS\""));
  EXPECT_THAT(script, HasSubstr("set_default_active_thread_percentage"));
  EXPECT_THAT(script, HasSubstr("set_default_device_pinned_mem_limit"));
  EXPECT_THAT(script, HasSubstr("echo \"startup complete\" >\"$logs/startup.log\""));
  EXPECT_THAT(script, HasSubstr("exec tail -n +1 -f \"$logs/control.log\""));
  EXPECT_EQ(EnvOf(c, "CUDA_VISIBLE_DEVICES"), std::string(kGpu) + "," + kMig);
  EXPECT_EQ(EnvOf(c, "FEATURE_GATES"), "MPSSupport=true,TimeSlicingSettings=false");
  EXPECT_EQ(EnvOf(c, "MPS_DAEMON_ARGS"), "");
  EXPECT_EQ(EnvOf(c, "MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(EnvOf(c, "MPS_PINNED_DEVICE_MEM_LIMITS"),
            std::string(kGpu) + "=1024M " + kMig + "=512M");
  EXPECT_EQ(c["startupProbe"]["exec"]["command"],
            json({"cat", "/driver-root/var/log/nvidia-mps/startup.log"}));
  EXPECT_EQ(c["startupProbe"]["initialDelaySeconds"], 1);
  EXPECT_EQ(c["startupProbe"]["periodSeconds"], 1);
  std::map<std::string, std::string> mounts, volumes;
  for (const json& m : c["volumeMounts"]) mounts[m["name"]] = m["mountPath"];
  for (const json& v : pod["volumes"]) {
    EXPECT_EQ(v["hostPath"]["type"], "Directory");
    volumes[v["name"]] = v["hostPath"]["path"];
  }
  EXPECT_EQ(mounts,
            (std::map<std::string, std::string>{{"driver-root", "/driver-root"},
                                                {"mps-shm", "/dev/shm"},
                                                {"mps-pipe", "/driver-root/tmp/nvidia-mps"},
                                                {"mps-log", "/driver-root/var/log/nvidia-mps"}}));
  EXPECT_EQ(volumes, (std::map<std::string, std::string>{{"driver-root", "/run/nvidia/driver"},
                                                         {"mps-shm", dir + "/shm"},
                                                         {"mps-pipe", dir + "/pipe"},
                                                         {"mps-log", dir + "/log"}}));
}

TEST_F(MpsDaemonTest, OptionalFlagsAndMultiUserAndShmUnderTheDriverRoot) {
  ASSERT_TRUE(MakeDirectories(tmp_.path() + "/driver-root/dev/shm").ok());
  MpsDaemonEnv env = Env(dummy_.get());
  env.service_account = "mps-sa";
  env.image_pull_secrets = {"s1", "s2"};
  env.image_pull_policy = "IfNotPresent";
  MpsDaemonGroup g = Group();
  g.config.multi_user = true;
  g.config.default_active_thread_percentage.reset();
  g.pinned_memory_limits_mib.clear();
  auto d = MpsControlDaemon::Create(env, g);
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<json> dep = (*d)->RenderDeployment();
  ASSERT_TRUE(dep.ok()) << dep.status();
  const json& pod = (*dep)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "mps-sa");
  EXPECT_EQ(pod["imagePullSecrets"], json::parse(R"([{"name":"s1"},{"name":"s2"}])"));
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(EnvOf(c, "MPS_DAEMON_ARGS"), "-M");
  EXPECT_EQ(EnvOf(c, "MPS_ACTIVE_THREAD_PERCENTAGE"), "");
  EXPECT_EQ(EnvOf(c, "MPS_PINNED_DEVICE_MEM_LIMITS"), "");
  bool found = false;
  for (const json& m : c["volumeMounts"]) {
    if (m["name"] == "mps-shm") {
      EXPECT_EQ(m["mountPath"], "/driver-root/dev/shm");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(MpsDaemonTest, ValuesCannotChangeTheTemplateStructure) {
  MpsDaemonEnv env = Env(dummy_.get());
  env.image = "evil\"\n  hostNetwork: true\nx: {{NAME}} # '";
  env.feature_gates = "A=true\n- name: X";
  auto d = MpsControlDaemon::Create(env, Group());
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<json> dep = (*d)->RenderDeployment();
  ASSERT_TRUE(dep.ok()) << dep.status();
  const json& pod = (*dep)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["containers"][0]["image"], env.image);
  EXPECT_EQ(EnvOf(pod["containers"][0], "FEATURE_GATES"), env.feature_gates);
  EXPECT_FALSE(pod.contains("hostNetwork"));
  EXPECT_FALSE(dep->contains("x"));
}

TEST(MpsTemplateTest, SubstitutionNeedsEveryPlaceholder) {
  EXPECT_EQ(*SubstitutePlaceholders("a {{X}} b {{X}}", {{"X", "\"v\""}}), "a \"v\" b \"v\"");
  EXPECT_FALSE(SubstitutePlaceholders("a {{Y}}", {{"X", "1"}}).ok());
  EXPECT_FALSE(SubstitutePlaceholders("a {{X", {{"X", "1"}}).ok());
  // The compiled-in template has no placeholder RenderMpsDeployment does not fill (else every
  // render above would fail) and no leftover braces after rendering.
  EXPECT_THAT(std::string(MpsDeploymentTemplate()), HasSubstr("{{NAME}}"));
}

TEST_F(MpsDaemonTest, ContainerEditsPointAtTheHostDirectories) {
  auto d = Daemon(dummy_.get());
  ASSERT_NE(d, nullptr);
  const std::string dir = tmp_.path() + "/plugin/mps/" + d->Id();
  cdi::ContainerEdits want;
  want.env = {"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"};
  want.mounts = {
      {.host_path = dir + "/shm",
       .container_path = "/dev/shm",
       .options = {"rw", "nosuid", "nodev", "bind"}},
      {.host_path = dir + "/pipe",
       .container_path = "/tmp/nvidia-mps",
       .options = {"rw", "nosuid", "nodev", "bind"}},
  };
  EXPECT_EQ(d->ContainerEdits(), want);
}

TEST_F(MpsDaemonTest, StartCreatesDirsTmpfsComputeModeAndDeploymentIdempotently) {
  dra::testing::CannedHttpServer server({
      {201, R"({"kind":"Deployment","metadata":{"name":"x"}})"},
      {409,
       R"({"kind":"Status","status":"Failure","reason":"AlreadyExists","code":409,"message":"exists"})"},
  });
  auto client = ClientFor(server);
  auto d = Daemon(client.get());
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->Start().ok());
  const std::string dir = tmp_.path() + "/plugin/mps/" + d->Id();
  for (const char* sub : {"shm", "pipe", "log"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir + "/" + sub).c_str(), &st), 0) << sub;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0755u) << sub;
  }
  EXPECT_THAT(mounts_.calls,
              ElementsAre("mount shm " + dir + "/shm rw,nosuid,nodev,noexec,relatime,size=500k"));
  EXPECT_THAT(compute_modes_, ElementsAre(std::string(kGpu) + "=EXCLUSIVE_PROCESS"));
  // Again: the tmpfs is not stacked, the existing Deployment is fine.
  absl::Status again = d->Start();
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(mounts_.calls.size(), 1u);
  std::vector<std::pair<std::string, absl::Time>> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].first, "POST /apis/apps/v1/namespaces/gpu-driver/deployments HTTP/1.1");
}

TEST_F(MpsDaemonTest, StartReportsAnApiErrorWithTheDeploymentName) {
  dra::testing::CannedHttpServer server(
      {{403,
        R"({"kind":"Status","status":"Failure","reason":"Forbidden","code":403,"message":"no"})"}});
  auto client = ClientFor(server);
  auto d = Daemon(client.get());
  ASSERT_NE(d, nullptr);
  absl::Status s = d->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("create Deployment gpu-driver/mps-control-daemon-"));
}

constexpr char kReadyDeployment[] =
    R"({"kind":"Deployment","metadata":{"name":"d"},"status":{"readyReplicas":1}})";
constexpr char kReadyPods[] = R"({"kind":"PodList","items":[{"metadata":{"name":"p1"},
  "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],
  "containerStatuses":[{"name":"mps-control-daemon","ready":true,"started":true,
  "state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}]})";

TEST_F(MpsDaemonTest, AssertReadyPassesForOneReadyPod) {
  dra::testing::CannedHttpServer server({{200, kReadyDeployment}, {200, kReadyPods}});
  auto client = ClientFor(server);
  auto d = Daemon(client.get());
  ASSERT_NE(d, nullptr);
  absl::Status s = d->AssertReady(clock_.Now() + absl::Minutes(1));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(clock_.sleeps.empty());
  std::vector<std::pair<std::string, absl::Time>> requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_THAT(requests[1].first, HasSubstr("/api/v1/namespaces/gpu-driver/pods?labelSelector=app"));
}

TEST_F(MpsDaemonTest, AssertReadyExplainsAPendingPodAfterFourAttempts) {
  constexpr char kNotReady[] =
      R"({"kind":"Deployment","metadata":{"name":"d"},"status":{"replicas":1}})";
  constexpr char kPending[] = R"({"kind":"PodList","items":[{"metadata":{"name":"p1"},
    "status":{"phase":"Pending","containerStatuses":[{"name":"mps-control-daemon","ready":false,
    "restartCount":0,"state":{"waiting":{"reason":"ImagePullBackOff",
    "message":"Back-off pulling image \"x\""}}}]}}]})";
  constexpr char kEvents[] = R"({"kind":"EventList","items":[
    {"type":"Warning","reason":"Failed","message":"old","lastTimestamp":"2026-01-01T00:00:00Z"},
    {"type":"Normal","reason":"Pulling","message":"pulling","lastTimestamp":"2026-01-01T00:00:09Z"},
    {"type":"Warning","reason":"Failed","message":"pull access denied",
     "lastTimestamp":"2026-01-01T00:00:05Z"}]})";
  std::vector<dra::testing::CannedHttpServer::Reply> replies;
  for (int i = 0; i < 4; ++i) {
    replies.push_back({200, kNotReady});
    replies.push_back({200, kPending});
    replies.push_back({200, kEvents});
  }
  dra::testing::CannedHttpServer server(replies);
  auto client = ClientFor(server);
  auto d = Daemon(client.get());
  ASSERT_NE(d, nullptr);
  absl::Status s = d->AssertReady(clock_.Now() + absl::Minutes(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("not ready after 4 attempts"));
  EXPECT_THAT(s.message(), HasSubstr("pod gpu-driver/p1 on node node-a Pending"));
  EXPECT_THAT(s.message(), HasSubstr("container mps-control-daemon waiting: ImagePullBackOff: "
                                     "Back-off pulling image \"x\""));
  EXPECT_THAT(s.message(), HasSubstr("last warning event: Failed: pull access denied"));
  EXPECT_EQ(server.requests().size(), 12u);
  // Three sleeps between four attempts: [1,2] s, [2,4] s, [4,8] s.
  ASSERT_EQ(clock_.sleeps.size(), 3u);
  EXPECT_GE(clock_.sleeps[0], absl::Seconds(1));
  EXPECT_LE(clock_.sleeps[0], absl::Seconds(2));
  EXPECT_GE(clock_.sleeps[2], absl::Seconds(4));
  EXPECT_LE(clock_.sleeps[2], absl::Seconds(8));
}

TEST_F(MpsDaemonTest, AssertReadyStopsAtTheDeadlineAndNamesAMissingDeployment) {
  dra::testing::CannedHttpServer server(
      {{404,
        R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"nf"})"}});
  auto client = ClientFor(server);
  auto d = Daemon(client.get());
  ASSERT_NE(d, nullptr);
  absl::Status s = d->AssertReady(clock_.Now() + absl::Milliseconds(500));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("not ready after 1 attempt: Deployment gpu-driver/"
                                     "mps-control-daemon-"));
  EXPECT_THAT(s.message(), HasSubstr("does not exist"));
}

TEST_F(MpsDaemonTest, AssertReadyReportsACrashingContainerWithItsLastState) {
  constexpr char kCrashing[] = R"({"kind":"PodList","items":[{"metadata":{"name":"p1"},
    "status":{"phase":"Running","containerStatuses":[{"name":"mps-control-daemon","ready":false,
    "restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
    "lastState":{"terminated":{"exitCode":127,"reason":"Error"}}}]}}]})";
  dra::testing::CannedHttpServer server({{200, R"({"kind":"Deployment","status":{}})"},
                                         {200, kCrashing},
                                         {200, R"({"kind":"EventList","items":[]})"},
                                         {500, "{}"}});
  auto client = ClientFor(server);
  MpsDaemonEnv env = Env(client.get());
  env.ready_attempts = 1;
  auto d = MpsControlDaemon::Create(env, Group());
  ASSERT_TRUE(d.ok());
  absl::Status s = (*d)->AssertReady(clock_.Now() + absl::Minutes(1));
  EXPECT_THAT(s.message(), HasSubstr("waiting: CrashLoopBackOff, 3 restarts, last terminated: "
                                     "exit code 127 (Error)"));
  // The previous run's log was asked for (the canned server has none to give).
  std::vector<std::pair<std::string, absl::Time>> requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_THAT(requests[3].first, HasSubstr("/pods/p1/log?container=mps-control-daemon"));
}

TEST_F(MpsDaemonTest, StopWithoutItsDirectoryDoesNothing) {
  dra::testing::CannedHttpServer server({{500, "{}"}});
  auto client = ClientFor(server);
  MpsDaemonRecord record{.id = "u-0afda", .ns = "gpu-driver", .full_gpu_uuids = {kGpu}};
  EXPECT_TRUE(StopMpsControlDaemon(Env(client.get()), record).ok());
  EXPECT_TRUE(server.requests().empty());
  EXPECT_TRUE(compute_modes_.empty());
  EXPECT_TRUE(mounts_.calls.empty());
}

TEST_F(MpsDaemonTest, StopUndoesStartAndIsIdempotent) {
  dra::testing::CannedHttpServer server({
      {201, "{}"},                        // create
      {200, "{}"},                        // delete
      {200, R"({"kind":"Deployment"})"},  // still there (foreground deletion)
      {200, R"({"kind":"PodList","items":[{"metadata":{"name":"p1"}}]})"},
      {404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"},
      {200, R"({"kind":"PodList","items":[]})"},
  });
  auto client = ClientFor(server);
  auto d = Daemon(client.get());
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->Start().ok());
  // A second, stacked mount (outside interference) is peeled off too.
  const std::string dir = tmp_.path() + "/plugin/mps/" + d->Id();
  ++mounts_.depth[dir + "/shm"];
  compute_modes_.clear();
  absl::Status s = d->Stop();
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(std::filesystem::exists(tmp_.path() + "/plugin/mps"));
  EXPECT_THAT(compute_modes_, ElementsAre(std::string(kGpu) + "=DEFAULT"));
  EXPECT_EQ(mounts_.depth[dir + "/shm"], 0);
  std::vector<std::pair<std::string, absl::Time>> requests = server.requests();
  ASSERT_EQ(requests.size(), 6u);
  EXPECT_THAT(requests[1].first, HasSubstr("DELETE /apis/apps/v1/namespaces/gpu-driver/"
                                           "deployments/mps-control-daemon-"));
  EXPECT_EQ(clock_.sleeps.size(), 1u);  // one poll while the pod was still there
  // Again: nothing left to do, no request.
  EXPECT_TRUE(d->Stop().ok());
  EXPECT_EQ(server.requests().size(), 6u);
}

TEST_F(MpsDaemonTest, StopAfterAPartialStartAcceptsAMissingDeploymentAndNoMount) {
  dra::testing::CannedHttpServer server({
      {404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"},  // delete
      {404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"},  // get
      {200, R"({"kind":"PodList","items":[]})"},
  });
  auto client = ClientFor(server);
  MpsDaemonRecord record{.id = "u-0afda", .ns = "gpu-driver", .full_gpu_uuids = {kGpu}};
  const std::string dir = tmp_.path() + "/plugin/mps/u-0afda";
  ASSERT_TRUE(MakeDirectories(dir + "/shm").ok());  // crashed right after mkdir
  absl::Status s = StopMpsControlDaemon(Env(client.get()), record);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(mounts_.calls.empty());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST_F(MpsDaemonTest, StopGivesUpWhenPodsStayAndKeepsTheDirectory) {
  dra::testing::CannedHttpServer server({
      {200, "{}"},
      {404, R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})"},
      {200, R"({"kind":"PodList","items":[{"metadata":{"name":"stuck"}}]})"},
  });
  auto client = ClientFor(server);
  MpsDaemonEnv env = Env(client.get());
  env.stop_timeout = absl::Seconds(2);
  MpsDaemonRecord record{.id = "u-0afda", .ns = "gpu-driver", .full_gpu_uuids = {kGpu}};
  const std::string dir = tmp_.path() + "/plugin/mps/u-0afda";
  ASSERT_TRUE(MakeDirectories(dir + "/shm").ok());
  absl::Status s = StopMpsControlDaemon(env, record);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("pod stuck"));
  EXPECT_TRUE(std::filesystem::exists(dir));
  EXPECT_TRUE(compute_modes_.empty());  // the GPUs stay exclusive while a daemon may run
}

TEST(MpsDaemonRecordTest, JsonRoundTripAndRejection) {
  MpsDaemonRecord r{.id = "u-0afda", .ns = "ns", .full_gpu_uuids = {kGpu}};
  EXPECT_EQ(MpsDaemonRecordToJson(r),
            json::parse(R"({"id":"u-0afda","namespace":"ns","fullGpuUUIDs":[")" +
                        std::string(kGpu) + R"("]})"));
  absl::StatusOr<MpsDaemonRecord> back = MpsDaemonRecordFromJson(MpsDaemonRecordToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(MpsDaemonRecordFromJson(json::parse(R"({"id":"../x","namespace":"n"})")).ok());
  EXPECT_FALSE(MpsDaemonRecordFromJson(json::parse(R"({"id":"x"})")).ok());
  EXPECT_FALSE(
      MpsDaemonRecordFromJson(json::parse(R"({"id":"x","namespace":"n","fullGpuUUIDs":[1]})"))
          .ok());
}

TEST(MpsHostTest, ShmSizeIsHalfOfMemTotalWithTheUnitLetter) {
  dra::testing::TempDir tmp;
  const std::string path = tmp.path() + "/meminfo";
  ASSERT_TRUE(WriteFileAtomically(path, "MemTotal:       24567891 kB\n").ok());
  EXPECT_EQ(MpsShmSize(path), "12283945k");
  ASSERT_TRUE(WriteFileAtomically(path, "MemFree: 1 kB\n").ok());
  EXPECT_EQ(MpsShmSize(path), "65536k");
  EXPECT_EQ(MpsShmSize(tmp.path() + "/missing"), "65536k");
  EXPECT_EQ(MpsShmMountOptions("8k"), "rw,nosuid,nodev,noexec,relatime,size=8k");
}

TEST(MpsHostTest, MountPointFromMountinfoWithEscapes) {
  dra::testing::TempDir tmp;
  const std::string dir = tmp.path() + "/with space";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  std::string escaped = dir;
  escaped.replace(escaped.find(' '), 1, "\\040");
  const std::string mountinfo = tmp.path() + "/mountinfo";
  ASSERT_TRUE(WriteFileAtomically(mountinfo,
                                  "22 1 0:21 / / rw - ext4 /dev/root rw\n"
                                  "99 22 0:50 / " +
                                      escaped + " rw,nosuid - tmpfs shm rw\n")
                  .ok());
  EXPECT_EQ(IsMountPoint(dir, mountinfo).value_or(false), true);
  EXPECT_EQ(IsMountPoint(tmp.path(), mountinfo).value_or(true), false);
  EXPECT_EQ(IsMountPoint(tmp.path() + "/missing", mountinfo).value_or(true), false);
}

}  // namespace
}  // namespace dra::gpu
