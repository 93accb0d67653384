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

#include <sys/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/common/bench_node.h"

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
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
  dra::bench::BenchNode node({.tool = "prepare_bench",
                              .plugin = plugin,
                              .node_prefix = "bench-node",
                              .extra_args = {"--kube-api-qps=1000", "--kube-api-burst=1000"}});

  // Allocated claims, round-robin over the 8 GPUs.
  std::vector<std::pair<int, std::string>> made;  // index, uid
  for (int i = 0; i < claims; ++i) made.emplace_back(i, node.CreateAllocatedClaim(i));

  std::vector<double> prep_ms, unprep_ms;
  absl::Time loop_start = absl::Now();
  for (const auto& [i, uid] : made) {
    absl::Time t0 = absl::Now();
    node.Prepare(i, uid);
    prep_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    t0 = absl::Now();
    node.Unprepare(i, uid);
    unprep_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  double seconds = absl::ToDoubleSeconds(absl::Now() - loop_start);
  long rss = PeakRssKiB(node.pid());
  node.Stop();

  std::printf("prepare_bench: %d claims (8 mock H100 GPUs, one claim per call, real API server)\n",
              claims);
  std::printf("  start -> ResourceSlices visible: %.1f ms\n",
              absl::ToDoubleMilliseconds(node.time_to_slices()));
  std::printf("  prepare   p50 %.2f ms  p99 %.2f ms\n", Percentile(prep_ms, 0.5),
              Percentile(prep_ms, 0.99));
  std::printf("  unprepare p50 %.2f ms  p99 %.2f ms\n", Percentile(unprep_ms, 0.5),
              Percentile(unprep_ms, 0.99));
  std::printf("  claims/s (prepare+unprepare): %.1f\n", claims / seconds);
  std::printf("  plugin peak RSS: %.1f MiB\n", static_cast<double>(rss) / 1024.0);
  return 0;
}
