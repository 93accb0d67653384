// bench/rss: the memory footprint of gpu-kubelet-plugin against the budget (20 MiB peak RSS).
// Starts the plugin against the real local API server with a mock driver root (8 mock H100s),
// waits for its ResourceSlices, then drives N prepare/unprepare pairs over the DRA socket the way
// the kubelet does, and prints from /proc/<pid>/status after startup and after the prepares:
//   VmHWM (peak RSS), VmRSS split into RssAnon (heap, stacks) and RssFile (pages of the binary and
//   its shared libraries), and the number of shared libraries mapped (/proc/<pid>/maps);
//   and the plugin's memory cgroup (bench/common/bench_node.h) at the same two points: the working
//   set the kubelet would report for a container holding the plugin (usage - inactive_file), usage,
//   inactive_file, active_file and rss (anonymous), and the peak usage.
//
// Usage: rss_bench [--prepares N] [--plugin PATH] [--list-libraries] (needs hack/cluster/up.sh
// first). Compare two builds by running it with --plugin pointing at each binary; --list-libraries
// adds the resident pages of each mapped file.

#include <sys/types.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/common/bench_node.h"
#include "test/support/build_paths.h"

namespace {

using dra::bench::Die;

constexpr double kBudgetMiB = 20.0;

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
  auto mib = [&](const char* k) {
    return s.kib.count(k) ? static_cast<double>(s.kib.at(k)) / 1024.0 : -1.0;
  };
  std::printf("  %-22s %7.1f %7.1f %8.1f %8.1f %9.1f %6zu\n", label, mib("VmHWM"), mib("VmRSS"),
              mib("RssAnon"), mib("RssFile"), mib("RssShmem"), s.libraries.size());
}

}  // namespace

int main(int argc, char** argv) {
  int prepares = 100;
  bool list_libraries = false;
  std::string plugin = dra::testing::BinaryDir() + "/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin";
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
  dra::bench::BenchNode node(
      {.tool = "rss_bench", .plugin = plugin, .node_prefix = "rss-bench-node"});
  absl::SleepFor(absl::Seconds(2));  // informers synced, watches idle
  Sample started = Measure(node.pid());
  const auto started_cg = node.PluginCgroupMemory();
  for (int i = 0; i < prepares; ++i) {
    const std::string uid = node.CreateAllocatedClaim(i);
    node.Prepare(i, uid);
    node.Unprepare(i, uid);
  }
  Sample after = Measure(node.pid());
  const auto after_cg = node.PluginCgroupMemory();
  const std::string cgroup = node.cgroup();

  node.Stop();

  std::printf("rss_bench: %s (8 mock H100 GPUs, real API server)\n", plugin.c_str());
  std::printf("  %-22s %7s %7s %8s %8s %9s %6s\n", "MiB", "VmHWM", "VmRSS", "RssAnon", "RssFile",
              "RssShmem", "libs");
  Print("after startup", started);
  Print(absl::StrCat("after ", prepares, " prepares").c_str(), after);
  double peak = static_cast<double>(after.kib["VmHWM"]) / 1024.0;
  std::printf("  budget %.0f MiB peak RSS: %s (%.1f MiB)\n", kBudgetMiB,
              peak <= kBudgetMiB ? "within" : "OVER", peak);
  std::printf("  cgroup %s (the kubelet's working set = usage - inactive_file):\n",
              cgroup.empty() ? "(none)" : cgroup.c_str());
  std::printf("  %-22s %s\n", "after startup", dra::bench::FormatCgroupMemory(started_cg).c_str());
  std::printf("  %-22s %s\n", absl::StrCat("after ", prepares, " prepares").c_str(),
              dra::bench::FormatCgroupMemory(after_cg).c_str());
  if (list_libraries) {
    std::printf("  resident file pages by mapped file (after the prepares):\n");
    for (const auto& [path, kib] : after.rss_by_file_kib) {
      std::printf("    %7.1f MiB  %s\n", static_cast<double>(kib) / 1024.0, path.c_str());
    }
  }
  return 0;
}
