// bench/computedomain: how fast and how cheaply a ComputeDomain of N nodes forms, with the real
// compute-domain-controller and N real compute-domain-daemon processes (each with the fake
// nvidia-imex on a loopback address of its own) against the real local API server; the bench
// plays the kubelets (pod status, readiness probe). See sim_domain.h for what is simulated and
// docs/compute-domains.md "At scale" for results and where the time goes.
//
// Prints per N: time from ComputeDomain create to status Ready with all N nodes, split into
// phases; API requests by verb and resource from the API server's apiserver_request_total
// (before/after, the bench's own requests subtracted); 409 conflicts; controller and daemon peak
// RSS and CPU seconds; the machine's load. Budgets are printed beside the numbers; nothing is
// asserted.
//
// Usage: computedomain_bench [--nodes 4,18,72,256] [--qps Q --burst B] [--probe-period 1s]
//          [--probe-nice 19] [--timeout 180s] [--requests] [--binding-claims] (needs
//          hack/cluster/up.sh first; runs one N at a time). --binding-claims: one ResourceClaim per
//          node allocated with the channel's device binding conditions; prints when the controller
//          reported each node's IMEX daemon Ready on it (docs/compute-domains.md "Binding
//          conditions").
// DRA_KEEP_BENCH_DIRS=1 keeps the per-node logs (a failed run always keeps them).

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/computedomain/sim_domain.h"
#include "lib/common/signals.h"
#include "test/support/build_paths.h"
#include "test/support/crds.h"

namespace {

using dra::bench::SimResult;

constexpr double kReadyBudgetSeconds = 30;  // at N=256
constexpr double kControllerRssBudgetMiB = 64;
constexpr double kDaemonRssBudgetMiB = 16;

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(
      stderr,
      "computedomain_bench: %s\nusage: computedomain_bench [--nodes N[,N...]] [--qps Q] "
      "[--burst B] [--probe-period DURATION] [--probe-nice N] [--timeout DURATION] [--requests] "
      "[--binding-claims]\n",
      why.c_str());
  std::exit(2);
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return -1;
  size_t i = std::min(sorted.size() - 1,
                      static_cast<size_t>(std::lround(p * static_cast<double>(sorted.size() - 1))));
  return sorted[i];
}

// Who among the ComputeDomain components makes requests of this kind (from their code), or ""
// for requests only other clients make here (kube-controller-manager on the Node objects and the
// DaemonSet, kubelets, tests running beside the bench).
std::string MadeBy(const std::string& key) {
  static const std::map<std::string, std::string> kBy = {
      {"GET computedomains", "controller"},
      {"LIST computedomains", "controller"},
      {"PATCH computedomains", "controller"},
      {"PUT computedomains", "controller"},
      {"PUT computedomains/status", "controller"},
      {"GET daemonsets", "controller"},
      {"LIST daemonsets", "controller"},
      {"POST daemonsets", "controller"},
      {"PUT daemonsets", "controller"},
      {"DELETE daemonsets", "controller"},
      {"GET resourceclaimtemplates", "controller"},
      {"LIST resourceclaimtemplates", "controller"},
      {"POST resourceclaimtemplates", "controller"},
      {"PUT resourceclaimtemplates", "controller"},
      {"DELETE resourceclaimtemplates", "controller"},
      {"LIST nodes", "controller"},
      {"PUT nodes", "controller"},
      // The controller writes the cliques; each daemon lists and watches its own by name, which
      // the API server counts as a GET.
      {"LIST computedomaincliques", "controller"},
      {"POST computedomaincliques", "controller"},
      {"PUT computedomaincliques", "controller"},
      {"DELETE computedomaincliques", "controller"},
      {"GET computedomaincliques", "daemons"},
      {"LIST pods", "controller"},
      {"GET pods", "daemons"},
      {"PATCH pods", "daemons"},
  };
  auto it = kBy.find(key);
  return it == kBy.end() ? "" : it->second;
}

// Requests of the controller and the daemons: the rows MadeBy names, the bench's own subtracted.
double ComponentRequests(const SimResult& r, bool conflicts_only) {
  const auto& rows = conflicts_only ? r.requests.conflicts : r.requests.total;
  double sum = 0;
  for (const auto& [k, v] : rows) {
    if (MadeBy(k).empty()) continue;
    auto own = r.bench_requests.total.find(k);
    sum += v - (conflicts_only || own == r.bench_requests.total.end() ? 0 : own->second);
  }
  return sum;
}

std::string Secs(double s) { return s < 0 ? "-" : absl::StrFormat("%.1f", s); }

struct Summary {
  double daemon_rss_max = 0, daemon_cpu_sum = 0, imex_rss_max = 0, imex_cpu_sum = 0;
};
Summary Summarize(const SimResult& r) {
  Summary s;
  for (const auto& d : r.daemons) {
    s.daemon_rss_max = std::max(s.daemon_rss_max, d.peak_rss_mib);
    s.daemon_cpu_sum += d.cpu_seconds;
  }
  for (const auto& d : r.imex) {
    s.imex_rss_max = std::max(s.imex_rss_max, d.peak_rss_mib);
    s.imex_cpu_sum += d.cpu_seconds;
  }
  return s;
}

void PrintRequests(const SimResult& r) {
  std::printf("  API requests N=%d (apiserver_request_total delta; bench's own subtracted):\n",
              r.nodes);
  std::printf("    %-36s %-11s %8s %6s\n", "verb resource", "made by", "requests", "lost");
  for (const auto& [k, v] : r.requests.total) {
    auto own = r.bench_requests.total.find(k);
    double n = v - (own == r.bench_requests.total.end() ? 0 : own->second);
    auto c = r.requests.conflicts.find(k);
    if (n == 0) continue;
    std::string by = MadeBy(k);
    std::printf("    %-36s %-11s %8.0f %6.0f\n", k.c_str(), by.empty() ? "(others)" : by.c_str(), n,
                c == r.requests.conflicts.end() ? 0.0 : c->second);
  }
  for (const auto& [k, v] : r.requests.open_watches) {
    auto own = r.bench_requests.open_watches.find(k);
    double n = v - (own == r.bench_requests.open_watches.end() ? 0 : own->second);
    if (n != 0) std::printf("    %-36s %-11s %8.0f open at Ready\n", k.c_str(), "", n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {4, 18};
  dra::bench::SimOptions base;
  bool requests_detail = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--nodes") {
      sizes.clear();
      for (absl::string_view v : absl::StrSplit(value(), ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(v, &n) || n < 1) Usage("--nodes: positive integers, comma-separated");
        sizes.push_back(n);
      }
    } else if (a == "--qps") {
      if (!absl::SimpleAtod(value(), &base.controller_qps)) Usage("--qps: a number");
    } else if (a == "--burst") {
      if (!absl::SimpleAtoi(value(), &base.controller_burst)) Usage("--burst: an integer");
    } else if (a == "--probe-nice") {
      if (!absl::SimpleAtoi(value(), &base.probe_nice) || base.probe_nice < -20 ||
          base.probe_nice > 19)
        Usage("--probe-nice: an integer from -20 to 19");
    } else if (a == "--probe-period") {
      if (!absl::ParseDuration(value(), &base.probe_period)) Usage("--probe-period: e.g. 1s");
    } else if (a == "--timeout") {
      if (!absl::ParseDuration(value(), &base.timeout)) Usage("--timeout: e.g. 180s");
    } else if (a == "--requests") {
      requests_detail = true;
    } else if (a == "--binding-claims") {
      base.binding_claims = true;
    } else {
      Usage("unknown argument " + a);
    }
  }
  const std::string bin = dra::testing::BinaryDir();
  const char* cluster = std::getenv("DRA_CLUSTER_DIR");
  base.kubeconfig = std::string(cluster != nullptr && *cluster ? cluster : "/tmp/dra-cluster") +
                    "/admin.kubeconfig";
  base.controller_binary = bin + "/cmd/compute-domain-controller/compute-domain-controller";
  base.daemon_binary = bin + "/cmd/compute-domain-daemon/compute-domain-daemon";
  base.imex_binary = bin + "/test/doubles/imex/nvidia-imex";
  base.imex_ctl_binary = bin + "/test/doubles/imex/nvidia-imex-ctl";
  const char* tmp = std::getenv("TMPDIR");
  base.work_dir = tmp != nullptr && *tmp ? tmp : "/tmp";
  // The ComputeDomain CRDs, from the chart: the bench may run on a control plane that no Helm
  // install has touched.
  if (absl::Status crds = dra::testing::InstallChartCrds(); !crds.ok()) {
    std::fprintf(stderr, "computedomain_bench: %s\n", crds.ToString().c_str());
    return 1;
  }

  // Before any thread: a shutdown signal then only sets the flag and the run cleans up.
  auto signals = dra::SignalHandler::Start();
  if (!signals.ok()) Usage(std::string(signals.status().message()));
  dra::SignalHandler* sig = signals->get();
  base.stopped = [sig] { return sig->ShutdownRequested(); };

  std::printf(
      "computedomain_bench: controller --kube-api-qps=%g --kube-api-burst=%d (chart default 5/10); "
      "probe every %s until it passes (the daemon template's startup probe), at nice %d; "
      "cliques of %d; %ld cores\n",
      base.controller_qps, base.controller_burst, absl::FormatDuration(base.probe_period).c_str(),
      base.probe_nice, base.clique_size, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::fflush(stdout);
  std::vector<SimResult> results;
  for (int n : sizes) {
    if (sig->ShutdownRequested()) break;
    dra::bench::SimOptions o = base;
    o.nodes = n;
    dra::bench::SimDomain domain(o);
    SimResult r = domain.Run();
    domain.Cleanup();
    if (!r.failure.empty()) std::printf("  N=%d FAILED: %s\n", n, r.failure.c_str());
    if (requests_detail) PrintRequests(r);
    std::fflush(stdout);
    results.push_back(std::move(r));
  }

  std::printf(
      "\n  seconds after create (last node)      | API requests   | controller   | daemon "
      "(each) | fake imex | machine\n");
  std::printf(
      "  %4s %6s %6s %6s %6s %6s %7s | %6s %5s %5s | %6s %6s | %6s %5s | %6s | %4s %5s "
      "%6s %5s\n",
      "N", "pods", "regist", "probe", "entry", "READY", "budget", "total", "lost", "<N", "MiB",
      "cpu-s", "MiBmax", "cpu-s", "MiBmax", "busy", "load", "apisrv", "etcd");
  for (const SimResult& r : results) {
    if (r.daemons.empty()) {
      std::printf("  %4d failed before the domain formed (see above)\n", r.nodes);
      continue;
    }
    Summary s = Summarize(r);
    double total = ComponentRequests(r, false);
    double conflicts = ComponentRequests(r, true);
    std::printf(
        "  %4d %6s %6s %6s %6s %6s %7s | %6.0f %5.0f %5s | %6.1f %6.2f | %6.1f %5.2f | %6.1f | "
        "%3.0f%% %5.1f %6.1f %5.1f\n",
        r.nodes, Secs(r.phases.pods_started).c_str(), Secs(r.phases.registered).c_str(),
        Secs(r.phases.probes_passed).c_str(), Secs(r.phases.entries_ready).c_str(),
        Secs(r.phases.domain_ready).c_str(),
        r.nodes >= 256 ? (r.phases.domain_ready >= 0 && r.phases.domain_ready < kReadyBudgetSeconds
                              ? "<30 ok"
                              : "<30 OVER")
                       : "",
        total, conflicts, conflicts < r.nodes ? "ok" : "OVER", r.controller.peak_rss_mib,
        r.controller.cpu_seconds, s.daemon_rss_max,
        r.daemons.empty() ? 0.0 : s.daemon_cpu_sum / static_cast<double>(r.daemons.size()),
        s.imex_rss_max, 100.0 * r.machine_busy_fraction, r.load_1m, r.apiserver_cpu_seconds,
        r.etcd_cpu_seconds);
  }
  std::printf("\n  per-node spread (p50 / p90 / max seconds after create):\n");
  for (const SimResult& r : results) {
    if (r.daemons.empty()) continue;
    auto pp = [](const std::vector<double>& v) {
      return absl::StrFormat("%5s %5s %5s", Secs(Percentile(v, 0.5)), Secs(Percentile(v, 0.9)),
                             Secs(v.empty() ? -1 : v.back()));
    };
    Summary s = Summarize(r);
    std::printf(
        "  N=%-4d registered %s | probe passed %s | entry Ready %s | probes run %d (failed %d, "
        "%.1f cpu-s) | daemons %.1f cpu-s total, imex %.1f cpu-s total\n",
        r.nodes, pp(r.phases.per_node_registered).c_str(), pp(r.phases.per_node_probe).c_str(),
        pp(r.phases.per_node_entry_ready).c_str(), r.probes_run, r.probes_failed,
        r.probe_cpu_seconds, s.daemon_cpu_sum, s.imex_cpu_sum);
    if (base.binding_claims) {
      std::printf("  N=%-4d claim reported IMEXDaemonReady %s (last %s s; entry Ready last %s s)\n",
                  r.nodes, pp(r.phases.per_node_claim_bound).c_str(),
                  Secs(r.phases.claims_bound).c_str(), Secs(r.phases.entries_ready).c_str());
    }
  }
  std::printf(
      "  budgets: 256 nodes Ready < %.0f s; lost writes (409, and 422 of a clique patch's test) < "
      "N; controller peak RSS < %.0f MiB at "
      "N=256; daemon peak RSS < %.0f MiB each\n",
      kReadyBudgetSeconds, kControllerRssBudgetMiB, kDaemonRssBudgetMiB);
  for (const SimResult& r : results) {
    if (r.daemons.empty()) continue;
    Summary s = Summarize(r);
    std::printf("  N=%d: controller %.1f MiB %s, daemons max %.1f MiB %s\n", r.nodes,
                r.controller.peak_rss_mib,
                r.controller.peak_rss_mib < kControllerRssBudgetMiB ? "within" : "OVER",
                s.daemon_rss_max, s.daemon_rss_max < kDaemonRssBudgetMiB ? "within" : "OVER");
  }
  bool failed = false;
  for (const SimResult& r : results) failed |= !r.failure.empty();
  return failed ? 1 : 0;
}
