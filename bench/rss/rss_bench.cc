// bench/rss: the memory footprint of gpu-kubelet-plugin against the budget (20 MiB peak RSS).
// Starts the plugin against the real local API server with a mock driver root (8 mock H100s),
// waits for its ResourceSlices, then drives N prepare/unprepare pairs over the DRA socket the way
// the kubelet does, and prints from /proc/<pid>/status after startup and after the prepares:
//   VmHWM (peak RSS), VmRSS split into RssAnon (heap, stacks) and RssFile (pages of the binary and
//   its shared libraries), and the number of shared libraries mapped (/proc/<pid>/maps).
//
// Usage: rss_bench [--prepares N] [--plugin PATH] [--list-libraries] (needs hack/cluster/up.sh
// first). Compare two builds by running it with --plugin pointing at each binary; --list-libraries
// adds the resident pages of each mapped file.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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

constexpr double kBudgetMiB = 20.0;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "rss_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().message()));
  return std::move(*v);
}

struct Sample {
  std::map<std::string, long> kib;              // VmHWM, VmRSS, RssAnon, RssFile, RssShmem
  std::set<std::string> libraries;              // mapped shared objects
  std::map<std::string, long> rss_by_file_kib;  // resident pages per mapped file (smaps)
};

Sample Measure(pid_t pid) {
  Sample s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    for (const char* key : {"VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"}) {
      if (absl::StartsWith(line, absl::StrCat(key, ":"))) {
        s.kib[key] = std::strtol(line.c_str() + std::strlen(key) + 1, nullptr, 10);
      }
    }
  }
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    if (absl::StrContains(path, ".so")) s.libraries.insert(path);
  }
  std::ifstream smaps(absl::StrCat("/proc/", pid, "/smaps"));
  std::string current;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      size_t slash = line.find('/');
      current = slash == std::string::npos ? "" : line.substr(slash);
    } else if (!current.empty() && absl::StartsWith(line, "Rss:")) {
      s.rss_by_file_kib[current] += std::strtol(line.c_str() + 4, nullptr, 10);
    }
  }
  if (s.kib.empty()) Die(absl::StrCat("plugin ", pid, " is gone (see its log)"));
  return s;
}

void Print(const char* label, const Sample& s) {
  auto mib = [&](const char* k) { return s.kib.count(k) ? s.kib.at(k) / 1024.0 : -1.0; };
  std::printf("  %-22s %7.1f %7.1f %8.1f %8.1f %9.1f %6zu\n", label, mib("VmHWM"), mib("VmRSS"),
              mib("RssAnon"), mib("RssFile"), mib("RssShmem"), s.libraries.size());
}

}  // namespace

int main(int argc, char** argv) {
  int prepares = 100;
  bool list_libraries = false;
  std::string plugin = std::string(DRA_BINARY_DIR) + "/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--prepares" && i + 1 < argc)
      prepares = std::atoi(argv[++i]);
    else if (a == "--plugin" && i + 1 < argc)
      plugin = argv[++i];
    else if (a == "--list-libraries")
      list_libraries = true;
    else
      Die("usage: rss_bench [--prepares N] [--plugin PATH] [--list-libraries]");
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
  const std::string node = absl::StrCat("rss-bench-node-", getpid());
  Check(client->Create(dra::k8s::Node::kResource, "",
                       {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}}),
        "create node");
  const std::string cdi_root = absl::StrCat("/dev/shm/rss-bench-cdi-", getpid());
  const std::string log = tmp.path() + "/plugin.log";
  pid_t pid = fork();
  if (pid == 0) {
    freopen(log.c_str(), "w", stderr);
    execl(plugin.c_str(), plugin.c_str(), "--node-name", node.c_str(), "--kubeconfig",
          dra::testing::AdminKubeconfig().c_str(), "--cdi-root", cdi_root.c_str(),
          "--nvidia-driver-root", root.c_str(), "--container-driver-root", root.c_str(),
          "--proc-root", (root + "/proc").c_str(), "--kubelet-plugins-directory-path",
          (kubelet + "/plugins").c_str(), "--kubelet-registrar-directory-path",
          (kubelet + "/registry").c_str(), nullptr);
    _exit(127);
  }
  absl::Time start = absl::Now();
  for (;;) {
    auto list = client->List(dra::k8s::ResourceSlice::kResource, "",
                             {.field_selector = "spec.nodeName=" + node});
    if (list.ok() && !(*list)["items"].empty()) break;
    if (absl::Now() - start > absl::Seconds(30)) Die("no ResourceSlice within 30s; log " + log);
    absl::SleepFor(absl::Milliseconds(20));
  }
  absl::SleepFor(absl::Seconds(2));  // informers synced, watches idle
  Sample started = Measure(pid);

  const std::string ns = "default";
  auto channel = grpc::CreateChannel("unix://" + kubelet + "/plugins/gpu.nvidia.com/dra.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = drapb::DRAPlugin::NewStub(channel);
  std::vector<std::string> made;
  for (int i = 0; i < prepares; ++i) {
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
    made.push_back(name);
    created["status"] = {{"allocation",
                          {{"devices",
                            {{"results",
                              {{{"request", "gpu"},
                                {"driver", "gpu.nvidia.com"},
                                {"pool", node},
                                {"device", absl::StrCat("gpu-", i % 8)}}}}}}}}};
    auto updated =
        Check(client->UpdateStatus(dra::k8s::ResourceClaim::kResource, ns, created), "allocate");
    std::string uid = updated["metadata"]["uid"].get<std::string>();

    drapb::NodePrepareResourcesRequest req;
    auto* claim = req.add_claims();
    claim->set_namespace_(ns);
    claim->set_name(name);
    claim->set_uid(uid);
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
    grpc::Status s = stub->NodePrepareResources(&ctx, req, &resp);
    if (!s.ok()) Die("NodePrepareResources: " + s.error_message());
    if (!resp.claims().at(uid).error().empty()) Die("prepare: " + resp.claims().at(uid).error());
    drapb::NodeUnprepareResourcesRequest ureq;
    auto* uclaim = ureq.add_claims();
    uclaim->set_namespace_(ns);
    uclaim->set_name(name);
    uclaim->set_uid(uid);
    drapb::NodeUnprepareResourcesResponse uresp;
    grpc::ClientContext uctx;
    s = stub->NodeUnprepareResources(&uctx, ureq, &uresp);
    if (!s.ok()) Die("NodeUnprepareResources: " + s.error_message());
  }
  Sample after = Measure(pid);

  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::system(("rm -rf " + cdi_root).c_str());
  for (const auto& name : made) (void)client->Delete(dra::k8s::ResourceClaim::kResource, ns, name);
  (void)client->Delete(dra::k8s::Node::kResource, "", node);
  auto slices = client->ListAll(dra::k8s::ResourceSlice::kResource, "",
                                {.field_selector = "spec.nodeName=" + node});
  if (slices.ok()) {
    for (const auto& s : (*slices)["items"]) {
      (void)client->Delete(dra::k8s::ResourceSlice::kResource, "", s["metadata"]["name"]);
    }
  }

  std::printf("rss_bench: %s (8 mock H100 GPUs, real API server)\n", plugin.c_str());
  std::printf("  %-22s %7s %7s %8s %8s %9s %6s\n", "MiB", "VmHWM", "VmRSS", "RssAnon", "RssFile",
              "RssShmem", "libs");
  Print("after startup", started);
  Print(absl::StrCat("after ", prepares, " prepares").c_str(), after);
  double peak = after.kib["VmHWM"] / 1024.0;
  std::printf("  budget %.0f MiB peak RSS: %s (%.1f MiB)\n", kBudgetMiB,
              peak <= kBudgetMiB ? "within" : "OVER", peak);
  if (list_libraries) {
    std::printf("  resident file pages by mapped file (after the prepares):\n");
    for (const auto& [path, kib] : after.rss_by_file_kib) {
      std::printf("    %7.1f MiB  %s\n", kib / 1024.0, path.c_str());
    }
  }
  return 0;
}
