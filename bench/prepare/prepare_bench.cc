// bench/prepare: drives gpu-kubelet-plugin's DRA socket the way the kubelet does, against the
// real local API server, and prints:
//   * time from process start to its ResourceSlices being visible in the API server;
//   * NodePrepareResources / NodeUnprepareResources latency p50/p99 per claim, claims per second;
//   * the plugin's peak RSS (VmHWM).
// Each claim is a real ResourceClaim, allocated (status.allocation written through the status
// subresource, as the scheduler's binding does) to one of the node's mock GPUs; one call per
// claim, prepare then unprepare, like a pod start and stop.
//
// Usage: prepare_bench [--claims N] [--plugin PATH] (needs hack/cluster/up.sh first).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "test/doubles/testing/mock_driver_root.h"
#include "test/support/cluster_env.h"

namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
using dra::k8s::Client;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "prepare_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().message()));
  return std::move(*v);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

long PeakRssKiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  int claims = 200;
  std::string plugin = std::string(DRA_BINARY_DIR) + "/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--claims") claims = std::atoi(argv[i + 1]);
    if (a == "--plugin") plugin = argv[i + 1];
  }
  auto rest = Check(dra::k8s::LoadKubeconfig(dra::testing::AdminKubeconfig()),
                    "kubeconfig (start the cluster with hack/cluster/up.sh)");
  auto client = Check(Client::Create(rest, {.qps = 0}), "client");

  dra::testing::TempDir tmp;
  const std::string root = tmp.path() + "/driver-root";
  if (auto s = dra::testing::MakeMockDriverRoot("h100-8x", root); !s.ok()) {
    Die(std::string(s.message()));
  }
  const std::string kubelet = tmp.path() + "/kubelet";
  std::system(absl::StrCat("mkdir -p ", kubelet, "/plugins ", kubelet, "/registry").c_str());
  const std::string node = absl::StrCat("bench-node-", getpid());
  Check(client->Create(dra::k8s::Node::kResource, "",
                       {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}}),
        "create node");

  // As on a node: CDI specs in /var/run/cdi (tmpfs), the checkpoint on disk under the kubelet's
  // plugin directory.
  const std::string cdi_root = absl::StrCat("/dev/shm/prepare-bench-cdi-", getpid());
  absl::Time start = absl::Now();
  pid_t pid = fork();
  if (pid == 0) {
    std::string log = tmp.path() + "/plugin.log";
    freopen(log.c_str(), "w", stderr);
    execl(plugin.c_str(), plugin.c_str(), "--node-name", node.c_str(), "--kubeconfig",
          dra::testing::AdminKubeconfig().c_str(), "--cdi-root", cdi_root.c_str(),
          "--nvidia-driver-root", root.c_str(), "--container-driver-root", root.c_str(),
          "--proc-root", (root + "/proc").c_str(), "--kubelet-plugins-directory-path",
          (kubelet + "/plugins").c_str(), "--kubelet-registrar-directory-path",
          (kubelet + "/registry").c_str(), "--kube-api-qps", "1000", "--kube-api-burst", "1000",
          nullptr);
    _exit(127);
  }
  absl::Duration to_slices;
  for (;;) {
    auto list = client->List(dra::k8s::ResourceSlice::kResource, "",
                             {.field_selector = "spec.nodeName=" + node});
    if (list.ok() && !(*list)["items"].empty()) {
      to_slices = absl::Now() - start;
      break;
    }
    if (absl::Now() - start > absl::Seconds(30)) Die("no ResourceSlice within 30s");
    absl::SleepFor(absl::Milliseconds(2));
  }

  // Allocated claims, round-robin over the 8 GPUs.
  std::vector<std::pair<std::string, std::string>> made;  // name, uid
  const std::string ns = "default";
  for (int i = 0; i < claims; ++i) {
    std::string name = absl::StrCat(node, "-c", i);
    nlohmann::json c = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", name}, {"namespace", ns}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}}};
    auto created = Check(client->Create(dra::k8s::ResourceClaim::kResource, ns, c), "claim");
    created["status"] = {{"allocation",
                          {{"devices",
                            {{"results",
                              {{{"request", "gpu"},
                                {"driver", "gpu.nvidia.com"},
                                {"pool", node},
                                {"device", absl::StrCat("gpu-", i % 8)}}}}}}}}};
    auto updated =
        Check(client->UpdateStatus(dra::k8s::ResourceClaim::kResource, ns, created), "allocate");
    made.emplace_back(name, updated["metadata"]["uid"].get<std::string>());
  }

  auto channel = grpc::CreateChannel("unix://" + kubelet + "/plugins/gpu.nvidia.com/dra.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = drapb::DRAPlugin::NewStub(channel);
  std::vector<double> prep_ms, unprep_ms;
  absl::Time loop_start = absl::Now();
  for (const auto& [name, uid] : made) {
    drapb::NodePrepareResourcesRequest req;
    auto* claim = req.add_claims();
    claim->set_namespace_(ns);
    claim->set_name(name);
    claim->set_uid(uid);
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
    absl::Time t0 = absl::Now();
    grpc::Status s = stub->NodePrepareResources(&ctx, req, &resp);
    prep_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (!s.ok()) Die("NodePrepareResources: " + s.error_message());
    if (!resp.claims().at(uid).error().empty()) Die("prepare: " + resp.claims().at(uid).error());

    drapb::NodeUnprepareResourcesRequest ureq;
    auto* uclaim = ureq.add_claims();
    uclaim->set_namespace_(ns);
    uclaim->set_name(name);
    uclaim->set_uid(uid);
    drapb::NodeUnprepareResourcesResponse uresp;
    grpc::ClientContext uctx;
    t0 = absl::Now();
    s = stub->NodeUnprepareResources(&uctx, ureq, &uresp);
    unprep_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (!s.ok()) Die("NodeUnprepareResources: " + s.error_message());
    if (!uresp.claims().at(uid).error().empty())
      Die("unprepare: " + uresp.claims().at(uid).error());
  }
  double seconds = absl::ToDoubleSeconds(absl::Now() - loop_start);
  long rss = PeakRssKiB(pid);

  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::system(("rm -rf " + cdi_root).c_str());
  for (const auto& [name, uid] : made) {
    (void)client->Delete(dra::k8s::ResourceClaim::kResource, ns, name);
  }
  (void)client->Delete(dra::k8s::Node::kResource, "", node);
  auto slices = client->ListAll(dra::k8s::ResourceSlice::kResource, "",
                                {.field_selector = "spec.nodeName=" + node});
  if (slices.ok()) {
    for (const auto& s : (*slices)["items"]) {
      (void)client->Delete(dra::k8s::ResourceSlice::kResource, "", s["metadata"]["name"]);
    }
  }

  std::printf("prepare_bench: %d claims (8 mock H100 GPUs, one claim per call, real API server)\n",
              claims);
  std::printf("  start -> ResourceSlices visible: %.1f ms\n",
              absl::ToDoubleMilliseconds(to_slices));
  std::printf("  prepare   p50 %.2f ms  p99 %.2f ms\n", Percentile(prep_ms, 0.5),
              Percentile(prep_ms, 0.99));
  std::printf("  unprepare p50 %.2f ms  p99 %.2f ms\n", Percentile(unprep_ms, 0.5),
              Percentile(unprep_ms, 0.99));
  std::printf("  claims/s (prepare+unprepare): %.1f\n", claims / seconds);
  std::printf("  plugin peak RSS: %.1f MiB\n", rss / 1024.0);
  return 0;
}
