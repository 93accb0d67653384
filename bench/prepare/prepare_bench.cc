// bench/prepare: drives gpu-kubelet-plugin's DRA socket the way the kubelet does, against the
// real local API server, and prints, each with its budget (docs/performance.md):
//   * time from process start to its ResourceSlices being visible in the API server;
//   * NodePrepareResources / NodeUnprepareResources latency p50/p99 per claim, one claim per
//     call, prepare then unprepare, like a pod start and stop (--claims, default 200);
//   * a concurrent run: --concurrent claims (64) prepared and unprepared from --threads client
//     threads (8: up to 8 kubelet calls in flight at once), as the kubelet starts pods in
//     parallel; each thread keeps to its own GPU so that no two prepared claims share a device;
//     prepares per second, prepare and unprepare p50/p99;
//   * with --load N: N busy-loop processes at normal priority (the bench's load generator),
//     started before the plugin and stopped at the end, so that start -> slices and every call
//     run on a loaded node; the loaded budgets apply then;
//   * with --all-features: every feature gate the mock node can run without hardware it lacks,
//     and the claim cache (docs/performance.md "Tail budgets with every feature on");
//   * --empty-calls (200) NodePrepareResources calls with no claims before the sequential run:
//     the round trip of the transport alone, and the CPU per call of client and plugin;
//   * the CPU per claim of client and plugin over the sequential run;
//   * the plugin's peak RSS (VmHWM), and the mock NVML library's share of its resident memory;
//   * its memory cgroup's figures at the end (bench/common/bench_node.h): the working set the
//     kubelet would report for a container holding the plugin (usage - inactive_file), usage,
//     inactive_file, active_file, rss (anonymous), and the peak usage (an upper bound of the peak
//     working set: the kernel keeps no peak of the latter);
//   * with --trace: the plugin's per-stage trace (--prepare-trace, lib/common/trace.h) as p50/p99
//     per stage over the sequential prepares and unprepares, and the claim cache's hit rate.
//   * with --mode dynamic-mig or both: a second plugin, started with the DynamicMIG gate on its own
//     node, prepares and unprepares --mig-claims (50) claims of a 1g.10gb MIG device one by one
//     (gpu-<i % 8>-mig-1g10gb-19-0): each prepare turns MIG mode on and creates the GPU and compute
//     instance in the mock NVML, each unprepare destroys them and turns MIG mode off again
//     (docs/dynamic-mig.md); p50/p99 printed beside the full-GPU numbers (--mode both).
// Each claim is a real ResourceClaim, allocated and reserved (status written through the status
// subresource, as the scheduler does) to one of the node's 8 mock GPUs (or a MIG device of one).
//
// Usage: prepare_bench [--mode full|dynamic-mig|both] [--claims N] [--mig-claims N]
//                      [--concurrent N] [--threads N] [--load N] [--all-features] [--trace]
//                      [--plugin PATH] [--empty-calls N] [--save-log PATH]
//                      [--plugin-arg ARG]...   (needs hack/cluster/up.sh first; --help)

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/bench_node.h"
#include "test/support/build_paths.h"

namespace {

// The budgets of issues 14 and 27 (docs/performance.md), device status on, every feature the
// node can run. Idle machine:
constexpr double kPrepareP50Ms = 0.35;
constexpr double kPrepareP99Ms = 1.5;
constexpr double kUnprepareP50Ms = 0.3;
constexpr double kUnprepareP99Ms = 1.5;
constexpr double kPeakRssMiB = 13;
// Loaded node (--load: both cores kept busy by the bench's own load generator):
constexpr double kLoadedPrepareP50Ms = 1;
constexpr double kLoadedPrepareP99Ms = 5;
// 8 concurrent kubelet calls: twice the loaded budgets (they hold on an idle machine too).
constexpr double kConcurrentPrepareP50Ms = 2 * kLoadedPrepareP50Ms;
constexpr double kConcurrentPrepareP99Ms = 2 * kLoadedPrepareP99Ms;
// Start -> slices, idle or loaded.
constexpr double kStartToSlicesMs = 100;

// --all-features: the gates that need no hardware the mock node lacks (PassthroughSupport needs
// an IOMMU and the host root, DeviceMetadata needs PassthroughSupport, FabricManagerPartitioning
// an NVLink fabric), with MPS's image name, and the claim cache.
constexpr const char* kAllFeatureGates =
    "--feature-gates=TimeSlicingSettings=true,MPSSupport=true,ConsumableShares=true,"
    "DRAListTypeAttributes=true,NVMLDeviceHealthCheck=true,DynamicMIG=true";
const char* const kAllFeatureArgs[] = {
    kAllFeatureGates, "--image-name=prepare-bench.invalid/mps:unused", "--claim-informer=true"};

constexpr const char* kHelp =
    R"(prepare_bench: NodePrepareResources / NodeUnprepareResources latency of gpu-kubelet-plugin
against the local cluster's API server (hack/cluster/up.sh first), each number beside its budget
(docs/performance.md).

  --claims N          sequential claims, prepared then unprepared one by one (200)
  --concurrent N      claims of the concurrent run (64)
  --threads N         client threads of the concurrent run: the kubelet calls in flight at once (8)
  --load N            N busy-loop processes at normal priority, started before the plugin and
                      stopped at the end (0: none); --load $(nproc) keeps every core busy and
                      applies the loaded-node budgets (prepare p50 <= 1 ms, p99 <= 5 ms)
  --all-features      run the plugin with every feature gate the mock node supports (all but
                      PassthroughSupport, DeviceMetadata, FabricManagerPartitioning) and
                      --claim-informer=true
  --trace             per-stage p50/p99 from the plugin's --prepare-trace lines
  --empty-calls N     calls with no claims before the sequential run (200)
  --mode M            full (default), dynamic-mig or both
  --mig-claims N      claims of the dynamic-mig run (50)
  --plugin PATH       the plugin binary (default: the build's)
  --plugin-arg ARG    one more argument for the plugin (repeatable)
  --save-log PATH     keep the plugin's log
)";

// The load generator: `n` child processes that spin at normal priority until Stop (or until the
// bench dies: PR_SET_PDEATHSIG). Forked before any thread of the bench starts.
class LoadGenerator {
 public:
  explicit LoadGenerator(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t parent = getpid();
      const pid_t pid = fork();
      if (pid < 0) dra::bench::Die(absl::StrCat("--load: fork: ", std::strerror(errno)));
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        volatile uint64_t spin = 0;
        while (true) spin = spin + 1;
      }
      pids_.push_back(pid);
    }
  }
  ~LoadGenerator() { Stop(); }
  LoadGenerator(const LoadGenerator&) = delete;
  LoadGenerator& operator=(const LoadGenerator&) = delete;

  void Stop() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

// "<label> <value> <unit>  (budget <= B <unit>: met|MISSED)".
void WithBudget(const char* label, double value, double budget, const char* unit) {
  std::printf("  %-34s %8.2f %-4s (budget <= %.2f %s: %s)\n", label, value, unit, budget, unit,
              value <= budget ? "met" : "MISSED");
}

long StatusKiB(pid_t pid, const char* field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0)
      return std::strtol(line.c_str() + std::strlen(field), nullptr, 10);
  }
  return -1;
}

// Resident KiB of the mappings whose path contains `name` (smaps "Rss:" lines).
long MappedRssKiB(pid_t pid, const std::string& name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/smaps"));
  std::string line;
  bool in_lib = false;
  long total = 0;
  while (std::getline(in, line)) {
    const bool header = !line.empty() && line.find(':') != std::string::npos &&
                        line.find('-') < line.find(' ') && std::isxdigit(line[0]);
    if (header) {
      in_lib = line.find(name) != std::string::npos;
    } else if (in_lib && line.rfind("Rss:", 0) == 0) {
      total += std::strtol(line.c_str() + 4, nullptr, 10);
    }
  }
  return total;
}

// The plugin's trace lines with `message` ("prepare trace"), each as key -> value.
std::vector<std::map<std::string, int64_t>> TraceLines(const std::string& log,
                                                       const std::string& message) {
  std::vector<std::map<std::string, int64_t>> out;
  std::ifstream in(log);
  std::string line;
  const std::string quoted = "\"" + message + "\"";
  while (std::getline(in, line)) {
    size_t at = line.find(quoted);
    if (at == std::string::npos) continue;
    std::map<std::string, int64_t> kv;
    for (absl::string_view pair : absl::StrSplit(line.substr(at + quoted.size()), ' ')) {
      std::pair<std::string, std::string> p = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      int64_t v = 0;
      if (!p.first.empty() && absl::SimpleAtoi(p.second, &v)) kv[p.first] = v;
    }
    out.push_back(std::move(kv));
  }
  return out;
}

// Milestones of the plugin's start-up, from its log's klog timestamps ("I1126 20:25:32.952275",
// local time of day), as ms after `fork` (the wall clock when the bench forked it): the first
// line (flags parsed: exec, dynamic loading and static initialization before it), devices
// discovered, the kubelet socket serving, start-up done, and the first slices created (the
// publisher's own thread). Lines that are missing print as -1.
void PrintStartup(const std::string& log, absl::Time fork, absl::Duration visible) {
  const absl::TimeZone tz = absl::LocalTimeZone();
  const absl::CivilSecond day = absl::ToCivilDay(fork, tz);
  auto at = [&](const std::string& line) -> double {
    // "I1126 20:25:32.952275 ..." : the time of day starts at column 6.
    if (line.size() < 21) return -1;
    int h = 0, m = 0;
    double sec = 0;
    if (std::sscanf(line.c_str() + 6, "%d:%d:%lf", &h, &m, &sec) != 3) return -1;
    absl::Time t =
        absl::FromCivil(absl::CivilSecond(day.year(), day.month(), day.day(), h, m, 0), tz) +
        absl::Seconds(sec);
    // A line logged after midnight (local time) belongs to the next day.
    if (t < fork - absl::Hours(12)) t += absl::Hours(24);
    return absl::ToDoubleMilliseconds(t - fork);
  };
  const std::vector<std::pair<const char*, const char*>> marks = {
      {"first log line", ""},
      {"devices discovered", "\"discovered devices\""},
      {"kubelet socket serving", "\"kubelet plugin started\""},
      {"start-up done", "\"gpu-kubelet-plugin running\""},
      {"slices created", "\"published resource slices\""}};
  std::vector<double> ms(marks.size(), -1);
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    for (size_t i = 0; i < marks.size(); ++i) {
      if (ms[i] < 0 && line.find(marks[i].second) != std::string::npos) ms[i] = at(line);
    }
  }
  std::printf("  start-up (ms after fork):");
  for (size_t i = 0; i < marks.size(); ++i) std::printf(" %s %.1f;", marks[i].first, ms[i]);
  std::printf(" visible to the bench's List %.1f\n", absl::ToDoubleMilliseconds(visible));
}

// p50/p99 of each "<stage>Us" over `lines` (calls where the stage ran).
void PrintStages(const char* title, const std::vector<std::map<std::string, int64_t>>& lines) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> values;
  for (const auto& kv : lines) {
    for (const auto& [k, v] : kv) {
      if (k.size() < 3 || k.substr(k.size() - 2) != "Us") continue;
      std::string stage = k.substr(0, k.size() - 2);
      if (!values.contains(stage)) order.push_back(stage);
      values[stage].push_back(static_cast<double>(v) / 1000.0);
    }
  }
  std::printf(
      "  %s (%zu calls; stages may nest: cdiWrite is inside cdiSpecStep, checkpoint{Load,Encode,"
      "Replace,OnCommit} inside checkpointWrite)\n",
      title, lines.size());
  std::printf("    %-22s %8s %8s %6s\n", "stage", "p50 ms", "p99 ms", "calls");
  for (const std::string& s : order) {
    std::printf("    %-22s %8.3f %8.3f %6zu\n", s.c_str(), Percentile(values[s], 0.5),
                Percentile(values[s], 0.99), values[s].size());
  }
}

// CPU time in ms used so far by this process (the client: every thread of the bench).
double SelfCpuMs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3;
  };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// utime + stime of /proc/<pid>/stat: every thread's, also of threads that have exited (a gRPC
// server thread may end after its call), in clock ticks.
double ProcessCpuMs(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ');
  // After "pid (comm) ": field 3 (state) is index 0, so utime (14) and stime (15) are 11 and 12.
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU of the plugin's live threads by thread name (/proc/<pid>/task/*/{comm,stat}), in ms;
// threads that have ended are not counted.
std::map<std::string, double> ThreadCpuMs(pid_t pid) {
  std::map<std::string, double> out;
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream comm_in(entry.path() / "comm");
    std::string comm;
    std::getline(comm_in, comm);
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(text.substr(paren + 2), ' ');
    double utime = 0, stime = 0;
    if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
        !absl::SimpleAtod(fields[12], &stime)) {
      continue;
    }
    out[comm] += (utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return out;
}

// CPU spent by client and plugin over a run of calls.
struct CpuUse {
  double client_ms = 0, plugin_ms = 0;
};

class CpuMeter {
 public:
  explicit CpuMeter(pid_t pid) : pid_(pid), client0_(SelfCpuMs()), plugin0_(ProcessCpuMs(pid)) {}
  CpuUse Done() const { return {SelfCpuMs() - client0_, ProcessCpuMs(pid_) - plugin0_}; }

 private:
  pid_t pid_;
  double client0_, plugin0_;
};

// Sequential prepare then unprepare of claims [0, n), one claim per call.
struct Sequential {
  std::vector<double> prep_ms, unprep_ms;
  double seconds = 0;
  CpuUse cpu;  // both calls of all n claims
};

// `n` NodePrepareResources calls with no claims, one after another (the transport's floor).
struct Empty {
  std::vector<double> ms;
  CpuUse cpu;
};

Empty RunEmpty(dra::bench::BenchNode& node, int n) {
  Empty out;
  CpuMeter meter(node.pid());
  for (int i = 0; i < n; ++i) {
    const absl::Time t0 = absl::Now();
    node.PrepareNothing();
    out.ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  out.cpu = meter.Done();
  return out;
}

Sequential RunSequential(dra::bench::BenchNode& node, const std::vector<std::string>& uids, int n) {
  Sequential out;
  CpuMeter meter(node.pid());
  const absl::Time start = absl::Now();
  for (int i = 0; i < n; ++i) {
    absl::Time t0 = absl::Now();
    node.Prepare(i, uids[i]);
    out.prep_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    t0 = absl::Now();
    node.Unprepare(i, uids[i]);
    out.unprep_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  out.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  out.cpu = meter.Done();
  return out;
}

// The dynamic MIG run: its own plugin (gate DynamicMIG) and node, `claims` claims of a 1g.10gb
// device at placement 0 of GPU i % 8, prepared and unprepared one by one.
struct MigRun {
  Sequential seq;
  double start_to_slices_ms = 0;
  std::vector<std::map<std::string, int64_t>> prep_traces, unprep_traces;
};

MigRun RunDynamicMig(const std::string& plugin, std::vector<std::string> plugin_args, int claims) {
  plugin_args.push_back("--feature-gates=DynamicMIG=true");
  dra::bench::BenchNode node({.tool = "prepare_bench_mig",
                              .plugin = plugin,
                              .node_prefix = "bench-mig-node",
                              .extra_args = plugin_args});
  std::vector<std::string> uids;
  for (int i = 0; i < claims; ++i) {
    uids.push_back(node.CreateAllocatedClaim(i, absl::StrCat("gpu-", i % 8, "-mig-1g10gb-19-0"),
                                             "mig.nvidia.com"));
  }
  absl::SleepFor(absl::Milliseconds(200));
  MigRun out;
  out.seq = RunSequential(node, uids, claims);
  out.start_to_slices_ms = absl::ToDoubleMilliseconds(node.time_to_slices());
  const std::string log = node.log_path();
  out.prep_traces = TraceLines(log, "prepare trace");
  out.unprep_traces = TraceLines(log, "unprepare trace");
  node.Stop();
  return out;
}

// The full-GPU run (the budgets of docs/performance.md): sequential, then concurrent claims.
Sequential RunFull(const std::string& plugin, const std::vector<std::string>& plugin_args,
                   int claims, int concurrent, int threads, bool trace, int empty_calls,
                   const std::string& save_log, int load) {
  dra::bench::BenchNode node({.tool = "prepare_bench",
                              .plugin = plugin,
                              .node_prefix = "bench-node",
                              .extra_args = plugin_args});

  // Allocated claims, round-robin over the 8 GPUs: the sequential ones, then the concurrent ones.
  std::vector<std::string> uids;
  for (int i = 0; i < claims + concurrent; ++i) uids.push_back(node.CreateAllocatedClaim(i));
  // The watch of the claim cache delivers the last allocation within a few ms; a pod's prepare
  // comes seconds after its scheduling, so the bench does not race its own setup.
  absl::SleepFor(absl::Milliseconds(200));

  const Empty empty = RunEmpty(node, empty_calls);
  Sequential seq = RunSequential(node, uids, claims);
  const std::vector<double>& prep_ms = seq.prep_ms;
  const std::vector<double>& unprep_ms = seq.unprep_ms;
  const double seconds = seq.seconds;

  // Concurrent: thread t prepares and unprepares the concurrent claims on GPU t % 8 in turn.
  std::vector<std::vector<double>> cprep(threads), cunprep(threads);
  const absl::Time cstart = absl::Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = claims; i < claims + concurrent; ++i) {
        if ((i - claims) % threads != t) continue;
        const absl::Time t0 = absl::Now();
        node.Prepare(i, uids[i]);
        cprep[t].push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
        const absl::Time t1 = absl::Now();
        node.Unprepare(i, uids[i]);
        cunprep[t].push_back(absl::ToDoubleMilliseconds(absl::Now() - t1));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double cseconds = absl::ToDoubleSeconds(absl::Now() - cstart);
  std::vector<double> all_cprep, all_cunprep;
  for (const auto& v : cprep) all_cprep.insert(all_cprep.end(), v.begin(), v.end());
  for (const auto& v : cunprep) all_cunprep.insert(all_cunprep.end(), v.begin(), v.end());

  const std::map<std::string, double> thread_cpu = ThreadCpuMs(node.pid());
  const long rss = StatusKiB(node.pid(), "VmHWM:");
  const long mock_rss = MappedRssKiB(node.pid(), "libnvidia-ml");
  const auto cgroup_memory = node.PluginCgroupMemory();
  const std::string log = node.log_path();
  auto prep_traces = TraceLines(log, "prepare trace");
  auto unprep_traces = TraceLines(log, "unprepare trace");
  const absl::Time started_at = node.started_at();
  if (!save_log.empty()) {
    std::ifstream in(log, std::ios::binary);
    std::ofstream out(save_log, std::ios::binary);
    out << in.rdbuf();
  }
  node.Stop();

  std::printf(
      "prepare_bench: %d claims (8 mock H100 GPUs, one claim per call, real API server), %s\n",
      claims,
      load > 0 ? absl::StrCat("loaded node (", load, " busy-loop processes)").c_str()
               : "no load generator (idle-machine budgets)");
  std::printf("  plugin args:");
  for (const std::string& a : plugin_args) std::printf(" %s", a.c_str());
  std::printf("\n");
  WithBudget("start -> ResourceSlices visible", absl::ToDoubleMilliseconds(node.time_to_slices()),
             kStartToSlicesMs, "ms");
  PrintStartup(log, started_at, node.time_to_slices());
  if (load > 0) {
    WithBudget("prepare p50 (loaded)", Percentile(prep_ms, 0.5), kLoadedPrepareP50Ms, "ms");
    WithBudget("prepare p99 (loaded)", Percentile(prep_ms, 0.99), kLoadedPrepareP99Ms, "ms");
    // The issue sets the loaded budgets for prepare; unprepare is held to the same.
    WithBudget("unprepare p50 (loaded)", Percentile(unprep_ms, 0.5), kLoadedPrepareP50Ms, "ms");
    WithBudget("unprepare p99 (loaded)", Percentile(unprep_ms, 0.99), kLoadedPrepareP99Ms, "ms");
  } else {
    WithBudget("prepare p50", Percentile(prep_ms, 0.5), kPrepareP50Ms, "ms");
    WithBudget("prepare p99", Percentile(prep_ms, 0.99), kPrepareP99Ms, "ms");
    WithBudget("unprepare p50", Percentile(unprep_ms, 0.5), kUnprepareP50Ms, "ms");
    WithBudget("unprepare p99", Percentile(unprep_ms, 0.99), kUnprepareP99Ms, "ms");
  }
  std::printf("  %-34s %8.1f /s\n", "claims/s (prepare+unprepare)", claims / seconds);
  if (claims > 0) {
    std::printf("  %-34s %8.3f ms client, %.3f ms plugin (utime+stime; status writes too)\n",
                "CPU per claim (prepare+unprepare)", seq.cpu.client_ms / claims,
                seq.cpu.plugin_ms / claims);
  }
  std::printf("  %-34s", "plugin CPU by thread name (ms)");
  for (const auto& [name, ms] : thread_cpu) std::printf(" %s %.0f;", name.c_str(), ms);
  std::printf(" (whole run, live threads)\n");
  if (empty_calls > 0) {
    std::printf("  %-34s %8.3f ms p50, %.3f ms p99; CPU per call %.3f ms client, %.3f ms plugin\n",
                "empty call (0 claims: transport)", Percentile(empty.ms, 0.5),
                Percentile(empty.ms, 0.99), empty.cpu.client_ms / empty_calls,
                empty.cpu.plugin_ms / empty_calls);
  }
  std::printf("  concurrent: %d claims from %d threads: %.1f prepares/s (with their unprepares)\n",
              concurrent, threads, concurrent / cseconds);
  WithBudget("concurrent prepare p50", Percentile(all_cprep, 0.5), kConcurrentPrepareP50Ms, "ms");
  WithBudget("concurrent prepare p99", Percentile(all_cprep, 0.99), kConcurrentPrepareP99Ms, "ms");
  WithBudget("concurrent unprepare p50", Percentile(all_cunprep, 0.5), kConcurrentPrepareP50Ms,
             "ms");
  WithBudget("concurrent unprepare p99", Percentile(all_cunprep, 0.99), kConcurrentPrepareP99Ms,
             "ms");
  WithBudget("plugin peak RSS (VmHWM)", static_cast<double>(rss) / 1024.0, kPeakRssMiB, "MiB");
  std::printf("  %-34s %8.2f MiB  (resident at the end; real NVML maps more)\n",
              "  of which mock libnvidia-ml", static_cast<double>(mock_rss) / 1024.0);
  std::printf("  %-34s %8.2f MiB\n", "  peak RSS without it",
              static_cast<double>(rss - mock_rss) / 1024.0);
  std::printf("  %-34s %s\n", "plugin cgroup at the end",
              dra::bench::FormatCgroupMemory(cgroup_memory).c_str());
  if (trace) {
    // The sequential calls come first in the log; the concurrent ones after.
    auto first = [claims](const std::vector<std::map<std::string, int64_t>>& lines) {
      const auto n =
          static_cast<std::ptrdiff_t>(std::min(lines.size(), static_cast<size_t>(claims)));
      return std::vector<std::map<std::string, int64_t>>(lines.begin(), lines.begin() + n);
    };
    const auto seq_prep = first(prep_traces);
    const auto seq_unprep = first(unprep_traces);
    PrintStages("prepare trace", seq_prep);
    PrintStages("unprepare trace", seq_unprep);
    int64_t hits = 0, misses = 0;
    for (const auto& kv : prep_traces) {
      if (auto it = kv.find("claimCacheHits"); it != kv.end()) hits += it->second;
      if (auto it = kv.find("claimCacheMisses"); it != kv.end()) misses += it->second;
    }
    if (hits + misses > 0) {
      std::printf("  claim cache: %lld hits, %lld misses (GET): hit rate %.1f%%\n",
                  static_cast<long long>(hits), static_cast<long long>(misses),
                  100.0 * static_cast<double>(hits) / static_cast<double>(hits + misses));
    } else {
      std::printf("  claim cache: off (every claim read is a GET)\n");
    }
  }
  return seq;
}

}  // namespace

int main(int argc, char** argv) {
  int claims = 200;
  int mig_claims = 50;
  std::string mode = "full";
  int concurrent = 64;
  int threads = 8;
  bool trace = false;
  int empty_calls = 200;
  int load = 0;
  bool all_features = false;
  std::string save_log;
  std::vector<std::string> plugin_args = {"--kube-api-qps=1000", "--kube-api-burst=1000"};
  std::string plugin = dra::testing::BinaryDir() + "/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) dra::bench::Die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--claims") {
      claims = std::atoi(value().c_str());
    } else if (a == "--mig-claims") {
      mig_claims = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--mode") {
      mode = value();
      if (mode != "full" && mode != "dynamic-mig" && mode != "both") {
        dra::bench::Die("--mode " + mode + ": expected full, dynamic-mig or both");
      }
    } else if (a == "--concurrent") {
      concurrent = std::atoi(value().c_str());
    } else if (a == "--threads") {
      threads = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--plugin") {
      plugin = value();
    } else if (a == "--plugin-arg") {
      plugin_args.push_back(value());
    } else if (a == "--empty-calls") {
      empty_calls = std::max(0, std::atoi(value().c_str()));
    } else if (a == "--save-log") {
      save_log = value();
    } else if (a == "--trace") {
      trace = true;
    } else if (a == "--load") {
      load = std::max(0, std::atoi(value().c_str()));
    } else if (a == "--all-features") {
      all_features = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else {
      dra::bench::Die("unknown argument " + a);
    }
  }
  // The plugin's client QPS is raised from its default (5): the claim cache's list and watch, and
  // the status writes of 200 claims in a second, would otherwise measure the rate limiter.
  if (trace) plugin_args.push_back("--prepare-trace");
  if (all_features) {
    for (const char* arg : kAllFeatureArgs) plugin_args.emplace_back(arg);
  }
  // Started before the plugin, so that start -> slices is measured on the loaded node too.
  LoadGenerator load_generator(load);
  const bool full = mode != "dynamic-mig";
  Sequential full_seq;
  if (full)
    full_seq = RunFull(plugin, plugin_args, claims, concurrent, threads, trace, empty_calls,
                       save_log, load);
  if (mode == "full") return 0;

  const MigRun mig = RunDynamicMig(plugin, plugin_args, mig_claims);
  std::printf(
      "prepare_bench dynamic-mig: %d claims of a 1g.10gb MIG device (gate DynamicMIG, 8 mock H100 "
      "GPUs with MIG off; each prepare turns MIG mode on and creates the GPU and compute instance, "
      "each unprepare destroys them and turns MIG mode off)\n",
      mig_claims);
  std::printf("  %-34s %8.2f ms   (no budget)\n", "start -> ResourceSlices visible",
              mig.start_to_slices_ms);
  std::printf("  %-34s %8.1f /s\n", "claims/s (prepare+unprepare)", mig_claims / mig.seq.seconds);
  std::printf("  %-22s %12s %12s\n", "latency (ms)", full ? "full GPU" : "", "1g MIG");
  auto row = [&](const char* label, const std::vector<double>& f, const std::vector<double>& m,
                 double p) {
    if (full) {
      std::printf("  %-22s %12.2f %12.2f\n", label, Percentile(f, p), Percentile(m, p));
    } else {
      std::printf("  %-22s %12s %12.2f\n", label, "", Percentile(m, p));
    }
  };
  row("prepare p50", full_seq.prep_ms, mig.seq.prep_ms, 0.5);
  row("prepare p99", full_seq.prep_ms, mig.seq.prep_ms, 0.99);
  row("unprepare p50", full_seq.unprep_ms, mig.seq.unprep_ms, 0.5);
  row("unprepare p99", full_seq.unprep_ms, mig.seq.unprep_ms, 0.99);
  std::printf(
      "  (no budget for the MIG numbers: their migDevices step runs the mock NVML, which does not "
      "model the time a real GPU takes to reconfigure)\n");
  if (trace) {
    PrintStages("dynamic-mig prepare trace", mig.prep_traces);
    PrintStages("dynamic-mig unprepare trace", mig.unprep_traces);
  }
  return 0;
}
