// bench/claimcache: what the GPU plugin's claim cache (--claim-informer, lib/kubeletplugin/
// claim_cache.h) costs the control plane at cluster scale, against reading each prepared claim
// with a GET. Not a test: it prints numbers and asserts nothing (docs/performance.md "The claim
// cache at cluster scale").
//
// Per N and mode, against the real local API server (hack/cluster/up.sh):
//   cache  N simulated nodes, each a kubeletplugin::ClaimCache of its own (the plugin's class,
//          in this process) with a k8s::Client of its own: a paged list, then a watch of every
//          ResourceClaim, each event decoded and filtered for the node's pool;
//   get    N simulated nodes, each with a k8s::Client of its own and no watch: a node reads each
//          claim it prepares with one GET (kubeletplugin::ClaimGetterFromClient, as the plugin
//          without the cache);
//   none   no node reads anything: the churn's own cost, the baseline of both.
// A steady churn of claims runs across the nodes at --rate claims/s: the bench creates a claim,
// writes its allocation (driver gpu.nvidia.com, the pool of node k % N) and reservedFor through
// the status subresource as the scheduler does, the node owning it reads it (from its cache, as
// soon as the watch delivered it, or with a GET; a cache that has not delivered it within 5 s
// counts a miss and GETs), the node unprepares it (ClaimCache::Unprepared) and the bench deletes
// it. The reservation names a consumer that is not a pod (bench.nvidia.com/benchconsumers), so
// that kube-controller-manager's claim controller leaves it alone (it drops reservations of pods
// that do not exist) and no pod objects are needed.
// With --real-plugins K, K real gpu-kubelet-plugin processes (bench/common/bench_node.h, a Node
// and mock GPUs each) run beside the simulated nodes with --claim-informer on in mode cache and
// off otherwise; they prepare nothing, so they show what the watch alone costs a real plugin.
//
// Measured over a window of --duration after --warmup of churn:
//   API server: CPU seconds (/proc/<pid>/stat of kube-apiserver), RSS (VmRSS sampled each
//     second: mean and max in the window, and its growth since before the nodes started), bytes
//     sent on resourceclaims: the watch events (apiserver_watch_events_sizes_sum, counted per
//     watcher) and the GET and LIST responses (apiserver_response_sizes_sum), watchers the API
//     server closed for being slow (apiserver_terminated_watchers_total);
//   the simulated nodes: this process's CPU less the churn's threads (per-thread CPU clocks),
//     divided by N; this process's RSS growth since before the nodes started, divided by N;
//   the real plugins: CPU and VmRSS from /proc, and the working set of their memory cgroups;
//   the read: time from the allocation write's answer to the claim being read (cache: the
//     watch's delivery to that node; get: the GET).
//
// Usage: claimcache_bench [--nodes 10,100,500,1000] [--modes cache,get] [--rate 20]
//          [--duration 60s] [--warmup 10s] [--repeats 1] [--workers 8] [--real-plugins 0]
// Modes run back to back at each N, in the order given, --repeats times.

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/bench_node.h"
#include "bench/computedomain/apiserver_metrics.h"
#include "bench/computedomain/sim_process.h"
#include "lib/common/signals.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/rest_config.h"
#include "lib/kubeletplugin/claim_cache.h"
#include "lib/kubeletplugin/claim_source.h"
#include "test/support/build_paths.h"

namespace {

using dra::bench::ProcStats;
using dra::bench::ReadProcStats;
using dra::kubeletplugin::ClaimCache;
using dra::kubeletplugin::ClaimRef;

constexpr char kNamespace[] = "default";
constexpr char kDriver[] = "gpu.nvidia.com";
constexpr absl::Duration kCacheWait = absl::Seconds(5);

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "claimcache_bench: %s\nusage: claimcache_bench [--nodes N[,N...]] "
               "[--modes cache,get,none] [--rate CLAIMS_PER_S] [--duration D] [--warmup D] "
               "[--repeats R] [--workers W] [--real-plugins K]\n",
               why.c_str());
  std::exit(2);
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

struct Options {
  std::vector<int> nodes = {10, 100};
  std::vector<std::string> modes = {"cache", "get"};
  double rate = 20;
  absl::Duration duration = absl::Seconds(60);
  absl::Duration warmup = absl::Seconds(10);
  int repeats = 1;
  int workers = 8;
  int real_plugins = 0;
};

// What the API server's /metrics and /proc say at one moment.
struct ServerSnapshot {
  double cpu_seconds = 0;
  double etcd_cpu_seconds = 0;
  double watch_bytes = 0;                        // apiserver_watch_events_sizes_sum, resourceclaims
  double watch_events = 0;                       // apiserver_watch_events_total, resourceclaims
  std::map<std::string, double> response_bytes;  // by verb, resourceclaims (any subresource)
  double terminated_watchers = 0;
};

struct Result {
  int nodes = 0;
  std::string mode;
  int repeat = 0;
  std::string failure;
  double window_s = 0;
  int claims_done = 0, claims_failed = 0, cache_hits = 0, cache_misses = 0;
  std::vector<double> read_ms;
  double apiserver_cpu_s = 0, etcd_cpu_s = 0;
  double apiserver_rss_mean = 0, apiserver_rss_max = 0, apiserver_rss_growth = 0;  // MiB
  double watch_bytes = 0, watch_events = 0, other_bytes = 0, terminated = 0;
  std::map<std::string, double> response_bytes;
  double node_cpu_s = 0;           // all simulated nodes together
  double node_rss_growth_mib = 0;  // this process, since before the nodes started
  double churn_cpu_s = 0;
  double sync_s = 0;               // cache: until every node's first list was in
  std::vector<ProcStats> real;     // at the end of the window
  std::vector<double> real_cpu_s;  // in the window
  std::vector<double> real_ws_mib;
  double load = 0, busy = 0;
};

class Bench {
 public:
  Bench(Options o, dra::k8s::RestConfig config, std::unique_ptr<dra::k8s::Client> client,
        std::function<bool()> stopped)
      : o_(std::move(o)),
        config_(std::move(config)),
        client_(std::move(client)),
        stopped_(std::move(stopped)) {}

  Result Run(int n, const std::string& mode, int repeat);

 private:
  struct Node {
    std::string name;
    std::unique_ptr<dra::k8s::Client> client;
    std::unique_ptr<ClaimCache> cache;
    dra::kubeletplugin::ClaimGetter getter;
  };
  struct Job {
    int64_t k = 0;
    absl::Time due;
  };

  absl::StatusOr<ServerSnapshot> Snapshot(pid_t apiserver, pid_t etcd);
  void Worker(std::vector<std::unique_ptr<Node>>* nodes);
  void Claim(int64_t k, std::vector<std::unique_ptr<Node>>* nodes, double* node_cpu);

  const Options o_;
  const dra::k8s::RestConfig config_;
  std::unique_ptr<dra::k8s::Client> client_;
  const std::function<bool()> stopped_;
  std::string run_id_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool closing_ = false;
  bool counting_ = false;  // inside the window
  int done_ = 0, failed_ = 0, hits_ = 0, misses_ = 0;
  std::vector<double> read_ms_;
  double churn_cpu_ = 0, node_cpu_in_workers_ = 0;  // inside the window
  std::string first_error_;
};

absl::StatusOr<ServerSnapshot> Bench::Snapshot(pid_t apiserver, pid_t etcd) {
  ServerSnapshot s;
  absl::StatusOr<std::string> text = client_->GetRaw("/metrics");
  if (!text.ok()) return text.status();
  const std::map<std::string, std::string> claims = {{"resource", "resourceclaims"}};
  s.watch_bytes = dra::bench::SumSamples(*text, "apiserver_watch_events_sizes_sum", claims);
  s.watch_events = dra::bench::SumSamples(*text, "apiserver_watch_events_total", claims);
  s.terminated_watchers =
      dra::bench::SumSamples(*text, "apiserver_terminated_watchers_total", claims);
  // Only reads have a response size; a WATCH's is recorded when it ends (the watch bytes above).
  for (const char* verb : {"GET", "LIST"}) {
    s.response_bytes[verb] = dra::bench::SumSamples(
        *text, "apiserver_response_sizes_sum", {{"resource", "resourceclaims"}, {"verb", verb}});
  }
  s.cpu_seconds = ReadProcStats(apiserver).cpu_seconds;
  if (etcd > 0) s.etcd_cpu_seconds = ReadProcStats(etcd).cpu_seconds;
  return s;
}

void Bench::Claim(int64_t k, std::vector<std::unique_ptr<Node>>* nodes, double* node_cpu) {
  const std::string name = absl::StrCat("ccb-", run_id_, "-", k);
  const std::string node_name = nodes->empty()
                                    ? std::string("ccb-nobody")
                                    : (*nodes)[static_cast<size_t>(k) % nodes->size()]->name;
  auto fail = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    if (counting_) ++failed_;
    if (first_error_.empty()) first_error_ = absl::StrCat(name, ": ", s.ToString());
  };
  nlohmann::json c = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", kNamespace}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}}};
  absl::StatusOr<nlohmann::json> created =
      client_->Create(dra::k8s::ResourceClaim::kResource, kNamespace, c);
  if (!created.ok()) return fail(created.status());
  const std::string uid = (*created)["metadata"]["uid"].get<std::string>();
  nlohmann::json result = {{"request", "gpu"},
                           {"driver", kDriver},
                           {"pool", node_name},
                           {"device", absl::StrCat("gpu-", k % 8)}};
  (*created)["status"] = {
      {"allocation", {{"devices", {{"results", nlohmann::json::array({result})}}}}},
      {"reservedFor",
       {{{"apiGroup", "bench.nvidia.com"},
         {"resource", "benchconsumers"},
         {"name", name},
         {"uid", absl::StrCat("00000000-0000-0000-0000-", absl::StrFormat("%012d", k))}}}}};
  absl::StatusOr<nlohmann::json> allocated =
      client_->UpdateStatus(dra::k8s::ResourceClaim::kResource, kNamespace, *created);
  if (!allocated.ok()) return fail(allocated.status());
  const absl::Time t_alloc = absl::Now();
  bool hit = false;
  if (!nodes->empty()) {
    Node& node = *(*nodes)[static_cast<size_t>(k) % nodes->size()];
    const ClaimRef ref{kNamespace, name, uid};
    const double cpu0 = ThreadCpuSeconds();
    if (node.cache != nullptr) {
      const absl::Time deadline = t_alloc + kCacheWait;
      while (node.cache->Find(ref) == nullptr && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(1));
      }
      hit = absl::Now() < deadline;
    }
    if (!hit) {
      absl::StatusOr<dra::k8s::ResourceClaim> got = node.getter(kNamespace, name);
      if (!got.ok()) {
        *node_cpu += ThreadCpuSeconds() - cpu0;
        return fail(got.status());
      }
    }
    const double read_ms = absl::ToDoubleMilliseconds(absl::Now() - t_alloc);
    if (node.cache != nullptr) node.cache->Unprepared(ref);
    *node_cpu += ThreadCpuSeconds() - cpu0;
    std::lock_guard<std::mutex> l(mu_);
    if (counting_) {
      read_ms_.push_back(read_ms);
      if (node.cache != nullptr) (hit ? hits_ : misses_)++;
    }
  }
  dra::k8s::DeleteOptions del;
  del.uid = uid;
  if (absl::Status s = client_->Delete(dra::k8s::ResourceClaim::kResource, kNamespace, name, del);
      !s.ok()) {
    return fail(s);
  }
  std::lock_guard<std::mutex> l(mu_);
  if (counting_) ++done_;
}

void Bench::Worker(std::vector<std::unique_ptr<Node>>* nodes) {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    const double cpu0 = ThreadCpuSeconds();
    double node_cpu = 0;
    Claim(job.k, nodes, &node_cpu);
    const double cpu = ThreadCpuSeconds() - cpu0;
    std::lock_guard<std::mutex> l(mu_);
    if (counting_) {
      churn_cpu_ += cpu - node_cpu;
      node_cpu_in_workers_ += node_cpu;
    }
  }
}

Result Bench::Run(int n, const std::string& mode, int repeat) {
  Result r;
  r.nodes = mode == "none" ? 0 : n;
  r.mode = mode;
  r.repeat = repeat;
  run_id_ = absl::StrCat(getpid() % 100000, "-", n, mode.substr(0, 1), repeat);
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.clear();
    closing_ = false;
    counting_ = false;
    done_ = failed_ = hits_ = misses_ = 0;
    read_ms_.clear();
    churn_cpu_ = node_cpu_in_workers_ = 0;
    first_error_.clear();
  }
  const pid_t apiserver = dra::bench::FindProcess("kube-apiserver");
  const pid_t etcd = dra::bench::FindProcess("etcd");
  if (apiserver < 0) {
    r.failure = "no kube-apiserver process on this machine";
    return r;
  }
  const pid_t self = getpid();
  const double apiserver_rss_before = ReadProcStats(apiserver).rss_mib;
  const double self_rss_before = ReadProcStats(self).rss_mib;

  // Real plugins first (they take a few seconds each to publish their slices).
  std::vector<std::unique_ptr<dra::bench::BenchNode>> real;
  for (int i = 0; i < o_.real_plugins; ++i) {
    real.push_back(std::make_unique<dra::bench::BenchNode>(dra::bench::BenchNode::Options{
        .tool = "claimcache_bench",
        .plugin = dra::testing::BinaryDir() + "/cmd/gpu-kubelet-plugin/gpu-kubelet-plugin",
        .node_prefix = absl::StrCat("ccb-real", i),
        .extra_args = {absl::StrCat("--claim-informer=", mode == "cache" ? "true" : "false")}}));
  }

  // The simulated nodes.
  std::vector<std::unique_ptr<Node>> nodes;
  const absl::Time t_start = absl::Now();
  for (int i = 0; i < r.nodes; ++i) {
    auto node = std::make_unique<Node>();
    node->name = absl::StrCat("ccb-node-", i);
    dra::k8s::ClientOptions co;
    co.request_timeout = absl::Seconds(10);
    absl::StatusOr<std::unique_ptr<dra::k8s::Client>> c = dra::k8s::Client::Create(config_, co);
    if (!c.ok()) {
      r.failure = absl::StrCat("client: ", c.status().ToString());
      return r;
    }
    node->client = *std::move(c);
    node->getter = dra::kubeletplugin::ClaimGetterFromClient(node->client.get());
    if (mode == "cache") {
      node->cache = std::make_unique<ClaimCache>(
          ClaimCache::Options{.driver_name = kDriver, .node_name = node->name});
      node->cache->Start(node->client.get());
    }
    nodes.push_back(std::move(node));
  }
  for (auto& node : nodes) {
    if (node->cache != nullptr && !node->cache->WaitForSync(absl::Seconds(120))) {
      r.failure = absl::StrCat(node->name, ": the claim cache did not sync in 120 s");
    }
  }
  r.sync_s = absl::ToDoubleSeconds(absl::Now() - t_start);
  auto stop_nodes = [&] {
    // In parallel: each cache's watch notices its stop within a second.
    std::vector<std::thread> stoppers;
    constexpr size_t kPer = 50;
    for (size_t b = 0; b < nodes.size(); b += kPer) {
      stoppers.emplace_back([&nodes, b] {
        for (size_t i = b; i < std::min(nodes.size(), b + kPer); ++i) {
          if (nodes[i]->cache != nullptr) nodes[i]->cache->Stop();
        }
      });
    }
    for (auto& t : stoppers) t.join();
    nodes.clear();
    for (auto& p : real) p->Stop();
    real.clear();
  };
  if (!r.failure.empty()) {
    stop_nodes();
    return r;
  }

  // The churn: a pacer hands claim numbers to the workers at the rate.
  std::vector<std::thread> workers;
  for (int w = 0; w < o_.workers; ++w) workers.emplace_back([&] { Worker(&nodes); });
  std::atomic<bool> pacing{true};
  std::atomic<int64_t> behind{0};
  std::thread pacer([&] {
    const absl::Time begin = absl::Now();
    for (int64_t k = 0; pacing.load(); ++k) {
      const absl::Time due = begin + absl::Seconds(static_cast<double>(k) / o_.rate);
      absl::SleepFor(due - absl::Now());
      std::lock_guard<std::mutex> l(mu_);
      if (queue_.size() > 2 * static_cast<size_t>(o_.workers)) {
        ++behind;  // the workers do not keep up: this claim is not made
        continue;
      }
      queue_.push_back(Job{k, due});
      cv_.notify_one();
    }
  });
  auto finish = [&] {
    pacing = false;
    pacer.join();
    {
      std::lock_guard<std::mutex> l(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers) t.join();
    stop_nodes();
  };

  absl::SleepFor(o_.warmup);
  absl::StatusOr<ServerSnapshot> before = Snapshot(apiserver, etcd);
  const ProcStats self0 = ReadProcStats(self);
  std::vector<double> real_cpu0;
  for (auto& p : real) real_cpu0.push_back(ReadProcStats(p->pid()).cpu_seconds);
  const dra::bench::CpuTimes m0 = dra::bench::MachineCpu();
  const absl::Time w0 = absl::Now();
  {
    std::lock_guard<std::mutex> l(mu_);
    counting_ = true;
  }
  std::vector<double> rss;
  double self_rss_max = 0;
  while (absl::Now() - w0 < o_.duration && !stopped_()) {
    absl::SleepFor(absl::Seconds(1));
    rss.push_back(ReadProcStats(apiserver).rss_mib);
    self_rss_max = std::max(self_rss_max, ReadProcStats(self).rss_mib);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    counting_ = false;
  }
  r.window_s = absl::ToDoubleSeconds(absl::Now() - w0);
  absl::StatusOr<ServerSnapshot> after = Snapshot(apiserver, etcd);
  const ProcStats self1 = ReadProcStats(self);
  const dra::bench::CpuTimes m1 = dra::bench::MachineCpu();
  r.load = dra::bench::LoadAverage1m();
  r.busy = m1.total > m0.total
               ? static_cast<double>(m1.busy - m0.busy) / static_cast<double>(m1.total - m0.total)
               : 0;
  for (size_t i = 0; i < real.size(); ++i) {
    ProcStats p = ReadProcStats(real[i]->pid());
    r.real.push_back(p);
    r.real_cpu_s.push_back(p.cpu_seconds - real_cpu0[i]);
    absl::StatusOr<dra::bench::CgroupMemory> m = real[i]->PluginCgroupMemory();
    r.real_ws_mib.push_back(m.ok() ? static_cast<double>(m->working_set()) / (1 << 20) : -1);
  }
  finish();

  if (!before.ok() || !after.ok()) {
    r.failure = absl::StrCat("metrics: ", (!before.ok() ? before : after).status().ToString());
    return r;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    r.claims_done = done_;
    r.claims_failed = failed_;
    r.cache_hits = hits_;
    r.cache_misses = misses_;
    r.read_ms = read_ms_;
    r.churn_cpu_s = churn_cpu_;
    if (!first_error_.empty()) r.failure = first_error_;
  }
  if (behind > 0) {
    absl::StrAppend(&r.failure, r.failure.empty() ? "" : "; ", behind.load(),
                    " claims not made: the churn fell behind its rate");
  }
  r.apiserver_cpu_s = after->cpu_seconds - before->cpu_seconds;
  r.etcd_cpu_s = after->etcd_cpu_seconds - before->etcd_cpu_seconds;
  for (double v : rss) {
    r.apiserver_rss_mean += v / static_cast<double>(rss.size());
    r.apiserver_rss_max = std::max(r.apiserver_rss_max, v);
  }
  r.apiserver_rss_growth = r.apiserver_rss_max - apiserver_rss_before;
  r.watch_bytes = after->watch_bytes - before->watch_bytes;
  r.watch_events = after->watch_events - before->watch_events;
  r.terminated = after->terminated_watchers - before->terminated_watchers;
  for (const auto& [verb, v] : after->response_bytes) {
    double d = v - before->response_bytes.at(verb);
    r.response_bytes[verb] = d;
    r.other_bytes += d;
  }
  // This process's CPU in the window, less the churn's share of the workers: the simulated nodes
  // (their watch threads, and the reads the workers made for them), plus the sampling loop.
  r.node_cpu_s = (self1.cpu_seconds - self0.cpu_seconds) - r.churn_cpu_s;
  r.node_rss_growth_mib = self_rss_max - self_rss_before;
  return r;
}

std::string Fmt(double v, const absl::FormatSpec<double>& f) {
  return v < 0 ? "-" : absl::StrFormat(f, v);
}

void PrintRow(const Result& r) {
  const double w = r.window_s > 0 ? r.window_s : 1;
  const double claims = r.claims_done > 0 ? r.claims_done : 1;
  const double per_node = r.nodes > 0 ? 1.0 / r.nodes : 0;
  std::string real = "-";
  if (!r.real.empty()) {
    double cpu = 0, rss = 0, ws = 0;
    for (size_t i = 0; i < r.real.size(); ++i) {
      cpu += r.real_cpu_s[i] / static_cast<double>(r.real.size());
      rss = std::max(rss, r.real[i].rss_mib);
      ws = std::max(ws, r.real_ws_mib[i]);
    }
    real = absl::StrFormat("%5.1f %5.1f %4.1f", 1000 * cpu / w, rss, ws);
  }
  std::printf(
      "%5d %-5s %2d | %5.1f %5d %3d | %6.1f %5.2f %6.0f %6.0f %5.0f | %8.1f %7.0f %7.1f %4.0f | "
      "%7s %6s %5s | %16s | %6s %6s %4d/%-4d | %4.1f %3.0f%% %5.1f\n",
      r.nodes, r.mode.c_str(), r.repeat, r.claims_done / w, r.claims_done, r.claims_failed,
      100 * r.apiserver_cpu_s / w, 1000 * r.apiserver_cpu_s / claims, r.apiserver_rss_mean,
      r.apiserver_rss_max, r.apiserver_rss_growth, r.watch_bytes / w / 1024, r.watch_events / w,
      r.other_bytes / w / 1024, r.terminated,
      r.nodes > 0 ? Fmt(1000 * r.node_cpu_s / w * per_node, "%.3f").c_str() : "-",
      r.nodes > 0 ? Fmt(1000 * r.node_cpu_s / w, "%.1f").c_str() : "-",
      r.nodes > 0 ? Fmt(1024 * r.node_rss_growth_mib * per_node, "%.0f").c_str() : "-",
      real.c_str(), Fmt(Percentile(r.read_ms, 0.5), "%.2f").c_str(),
      Fmt(Percentile(r.read_ms, 0.99), "%.1f").c_str(), r.cache_hits, r.cache_misses, r.load,
      100 * r.busy, 1000 * r.churn_cpu_s / w);
  std::fflush(stdout);
}

void PrintHeader() {
  std::printf(
      "\n%5s %-5s %2s | %5s %5s %3s | %6s %5s %6s %6s %5s | %8s %7s %7s %4s | %7s %6s %5s | "
      "%16s | %6s %6s %9s | %4s %4s %5s\n",
      "N", "mode", "r", "cl/s", "done", "err", "apiCPU", "ms/cl", "RSSavg", "RSSmax", "grow",
      "watchKiB/s", "ev/s", "respKiB/s", "kill", "nodeCPU", "allCPU", "KiB/n", "real ms/s MiB ws",
      "rd p50", "p99", "hit/miss", "load", "busy", "churn");
  std::printf(
      "%5s %-5s %2s | %5s %5s %3s | %6s %5s %6s %6s %5s | %8s %7s %7s %4s | %7s %6s %5s | %16s | "
      "%6s %6s %9s | %4s %4s %5s\n",
      "", "", "", "", "", "", "%core", "", "MiB", "MiB", "MiB", "", "", "", "", "ms/s/n", "ms/s",
      "", "", "ms", "ms", "", "1m", "", "ms/s");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--nodes") {
      o.nodes.clear();
      for (absl::string_view v : absl::StrSplit(value(), ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(v, &n) || n < 1) Usage("--nodes: positive integers, comma-separated");
        o.nodes.push_back(n);
      }
    } else if (a == "--modes") {
      o.modes.clear();
      for (absl::string_view v : absl::StrSplit(value(), ',')) {
        if (v != "cache" && v != "get" && v != "none") Usage("--modes: cache, get or none");
        o.modes.emplace_back(v);
      }
    } else if (a == "--rate") {
      if (!absl::SimpleAtod(value(), &o.rate) || o.rate <= 0) Usage("--rate: a positive number");
    } else if (a == "--duration") {
      if (!absl::ParseDuration(value(), &o.duration)) Usage("--duration: e.g. 60s");
    } else if (a == "--warmup") {
      if (!absl::ParseDuration(value(), &o.warmup)) Usage("--warmup: e.g. 10s");
    } else if (a == "--repeats") {
      if (!absl::SimpleAtoi(value(), &o.repeats) || o.repeats < 1) Usage("--repeats: >= 1");
    } else if (a == "--workers") {
      if (!absl::SimpleAtoi(value(), &o.workers) || o.workers < 1) Usage("--workers: >= 1");
    } else if (a == "--real-plugins") {
      if (!absl::SimpleAtoi(value(), &o.real_plugins) || o.real_plugins < 0) {
        Usage("--real-plugins: >= 0");
      }
    } else {
      Usage("unknown argument " + a);
    }
  }
  const char* cluster = std::getenv("DRA_CLUSTER_DIR");
  const std::string kubeconfig =
      std::string(cluster != nullptr && *cluster ? cluster : "/tmp/dra-cluster") +
      "/admin.kubeconfig";
  absl::StatusOr<dra::k8s::RestConfig> config = dra::k8s::LoadKubeconfig(kubeconfig);
  if (!config.ok()) Usage(std::string(config.status().message()));
  dra::k8s::ClientOptions bench_options;
  bench_options.qps = 0;  // the churn must not wait on its own limiter
  absl::StatusOr<std::unique_ptr<dra::k8s::Client>> client =
      dra::k8s::Client::Create(*config, bench_options);
  if (!client.ok()) Usage(std::string(client.status().message()));

  auto signals = dra::SignalHandler::Start();
  if (!signals.ok()) Usage(std::string(signals.status().message()));
  dra::SignalHandler* sig = signals->get();

  std::printf(
      "claimcache_bench: churn %.1f claims/s (create, allocate+reserve via status, read by the "
      "owning node, delete) with %d workers; window %s after %s of warm-up; %ld cores; real "
      "plugins %d\n",
      o.rate, o.workers, absl::FormatDuration(o.duration).c_str(),
      absl::FormatDuration(o.warmup).c_str(), ::sysconf(_SC_NPROCESSORS_ONLN), o.real_plugins);
  std::fflush(stdout);
  Bench bench(o, *config, *std::move(client), [sig] { return sig->ShutdownRequested(); });
  std::vector<Result> results;
  PrintHeader();
  for (int n : o.nodes) {
    for (int rep = 1; rep <= o.repeats; ++rep) {
      for (const std::string& mode : o.modes) {
        if (sig->ShutdownRequested()) break;
        Result r = bench.Run(n, mode, rep);
        PrintRow(r);
        if (!r.failure.empty())
          std::printf("      N=%d %s: %s\n", n, mode.c_str(), r.failure.c_str());
        if (mode == "cache")
          std::printf("      (cache: all %d nodes synced %.1f s after start)\n", r.nodes, r.sync_s);
        results.push_back(std::move(r));
      }
    }
  }
  std::printf(
      "\ncolumns: cl/s claims completed per second in the window; apiCPU kube-apiserver CPU in "
      "%% of one core, ms/cl its CPU ms per claim; RSSavg/RSSmax its VmRSS in the window, grow its "
      "growth since before the nodes started; watchKiB/s resourceclaims watch events sent (all "
      "watchers), ev/s their number, respKiB/s the resourceclaims GET and LIST responses, kill "
      "watchers the API server terminated; nodeCPU simulated nodes' CPU per "
      "node (ms per s), allCPU all of them, KiB/n this process's RSS growth per node; real: the "
      "real plugins' CPU ms/s, VmRSS and cgroup working set (MiB); rd: time from allocation to "
      "the node's read; churn: the churn threads' own CPU\n");
  for (const Result& r : results) {
    if (r.response_bytes.empty()) continue;
    std::string by;
    for (const auto& [verb, v] : r.response_bytes) {
      if (v > 0) absl::StrAppend(&by, " ", verb, " ", absl::StrFormat("%.0f", v / 1024), " KiB");
    }
    std::printf("  N=%d %s r%d: responses%s; watch %.0f KiB in %.0f events; etcd %.1f cpu-s\n",
                r.nodes, r.mode.c_str(), r.repeat, by.c_str(), r.watch_bytes / 1024, r.watch_events,
                r.etcd_cpu_s);
  }
  return 0;
}
