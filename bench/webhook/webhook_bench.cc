// Webhook throughput and latency: admission reviews per second and p50/p99 latency for 1 and 16
// concurrent keep-alive TLS clients against the real HTTPS server and handler, started in this
// process with a CA and certificate made at start-up. Client and server share the machine.
//
//   build/<dir>/bench/webhook/webhook_bench [--seconds=5] [--clients=1,16] [--handler-only]
//
// Also prints the cost of the admission handler alone (no TLS, no sockets), to tell where the
// time goes, and the CPU time per review: of the server's loop threads, and of the whole process
// (server and the clients), which unlike reviews/s hardly depends on what else the machine runs.
// Not a test: it prints numbers and asserts nothing about them.

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/metrics/metrics.h"
#include "lib/webhook/admission.h"
#include "lib/webhook/https_server.h"
#include "lib/webhook/testing/tls_testing.h"
#include "lib/webhook/tls_certs.h"
#include "lib/webhook/webhook.h"

namespace {

using Clock = std::chrono::steady_clock;

// What the API server sends for `kubectl create` of a claim with one GPU request and one
// GpuConfig (time-slicing), shaped like a real AdmissionReview (about 2 KiB).
constexpr char kReview[] = R"({
  "kind": "AdmissionReview",
  "apiVersion": "admission.k8s.io/v1",
  "request": {
    "uid": "0b1c6f4e-2a4d-4a55-9a0e-7d5b9f1b2c3d",
    "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
    "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
    "requestKind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
    "requestResource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
    "name": "shared-gpu",
    "namespace": "team-a",
    "operation": "CREATE",
    "userInfo": {
      "username": "system:serviceaccount:team-a:deployer",
      "uid": "5c7e2f0a-1111-4d2b-8c44-0a3b1c2d3e4f",
      "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"],
      "extra": {"authentication.kubernetes.io/credential-id": ["JTI=7a1f3c9e-0d2b-4e8f-9a6c-1b2d3e4f5a6b"]}
    },
    "object": {
      "apiVersion": "resource.k8s.io/v1",
      "kind": "ResourceClaim",
      "metadata": {
        "name": "shared-gpu",
        "namespace": "team-a",
        "uid": "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a",
        "creationTimestamp": "2026-11-22T02:00:00Z",
        "labels": {"app.kubernetes.io/name": "inference", "app.kubernetes.io/part-of": "llm"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\"}"},
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
          "apiVersion": "resource.k8s.io/v1", "time": "2026-11-22T02:00:00Z", "fieldsType": "FieldsV1",
          "fieldsV1": {"f:spec": {"f:devices": {"f:config": {}, "f:requests": {}}}}}]
      },
      "spec": {
        "devices": {
          "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
            "allocationMode": "ExactCount", "count": 1}}],
          "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}}}]
        }
      },
      "status": {}
    },
    "oldObject": null,
    "dryRun": false,
    "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
  }
})";

struct RunResult {
  double seconds = 0;
  double server_cpu = 0;   // seconds, the loop threads
  double process_cpu = 0;  // seconds, all threads
  uint64_t reviews = 0;
  uint64_t errors = 0;
  std::vector<double> latencies_us;
};

// CPU seconds of this process's threads named `name` (bench clients come and go; the server's
// loop threads live through all runs).
double ThreadsCpuSeconds(absl::string_view name) {
  double ticks = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string c;
    std::getline(comm, c);
    if (c != name) continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
    std::vector<absl::string_view> f =
        absl::StrSplit(absl::string_view(line).substr(paren + 2), ' ');
    unsigned long long utime = 0, stime = 0;
    if (f.size() > 12 && absl::SimpleAtoi(f[11], &utime) && absl::SimpleAtoi(f[12], &stime)) {
      ticks += static_cast<double>(utime + stime);
    }
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

RunResult Run(int port, const std::string& ca, int clients, double seconds) {
  std::atomic<bool> go{false}, stop{false};
  std::vector<RunResult> per(clients);
  std::vector<std::thread> threads;
  std::string path(dra::webhook::kValidatePath);
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      auto client = dra::webhook::testing::TlsClient::Connect(port, ca);
      if (!client.ok()) {
        std::fprintf(stderr, "connect: %s\n", std::string(client.status().message()).c_str());
        per[t].errors++;
        return;
      }
      for (int i = 0; i < 200; ++i) {
        if (!(*client)->Do("POST", path, "application/json", kReview).ok()) per[t].errors++;
      }
      while (!go.load()) std::this_thread::yield();
      per[t].latencies_us.reserve(1 << 20);
      while (!stop.load(std::memory_order_relaxed)) {
        auto start = Clock::now();
        auto r = (*client)->Do("POST", path, "application/json", kReview);
        auto end = Clock::now();
        if (!r.ok() || r->code != 200 || !absl::StrContains(r->body, "\"allowed\":true")) {
          per[t].errors++;
          if (!r.ok()) return;
          continue;
        }
        per[t].reviews++;
        per[t].latencies_us.push_back(
            std::chrono::duration<double, std::micro>(end - start).count());
      }
    });
  }
  // Let the connections and warm-up finish before timing.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double server_cpu = ThreadsCpuSeconds(dra::webhook::kLoopThreadName);
  double process_cpu = ProcessCpuSeconds();
  auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  auto end = Clock::now();
  RunResult total;
  // Clients still finish their last review: a few microseconds out of seconds.
  total.server_cpu = ThreadsCpuSeconds(dra::webhook::kLoopThreadName) - server_cpu;
  total.process_cpu = ProcessCpuSeconds() - process_cpu;
  for (auto& th : threads) th.join();
  total.seconds = std::chrono::duration<double>(end - start).count();
  for (auto& r : per) {
    total.reviews += r.reviews;
    total.errors += r.errors;
    total.latencies_us.insert(total.latencies_us.end(), r.latencies_us.begin(),
                              r.latencies_us.end());
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5;
  bool handler_only = false;
  std::vector<int> client_counts = {1, 16};
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--seconds=")) {
      if (!absl::SimpleAtod(a, &seconds)) return 2;
    } else if (a == "--handler-only") {
      handler_only = true;
    } else if (absl::ConsumePrefix(&a, "--clients=")) {
      client_counts.clear();
      for (absl::string_view c : absl::StrSplit(a, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(c, &n) || n < 1) return 2;
        client_counts.push_back(n);
      }
    } else {
      std::fprintf(stderr, "usage: %s [--seconds=5] [--clients=1,16] [--handler-only]\n", argv[0]);
      return 2;
    }
  }

  dra::FeatureGates gates;
  if (!dra::api::RegisterDriverFeatureGates(gates).ok() ||
      !gates.Set("TimeSlicingSettings=true,MPSSupport=true").ok()) {
    return 1;
  }

  // The handler alone.
  {
    const int n = 100000;
    size_t bytes = 0;
    // The scan of the text with the configs parsed alone (what the server runs), then the whole
    // document parsed (the reference it must match, and what ran before the scan).
    for (bool whole : {false, true}) {
      auto handle =
          whole ? dra::webhook::HandleAdmissionReviewWhole : dra::webhook::HandleAdmissionReview;
      auto start = Clock::now();
      double cpu = ThreadCpuSeconds();
      for (int i = 0; i < n; ++i) bytes += handle("application/json", kReview, gates).body.size();
      cpu = ThreadCpuSeconds() - cpu;
      double s = std::chrono::duration<double>(Clock::now() - start).count();
      std::printf(
          "handler only%s: %.0f reviews/s on one thread (%.2f us/review, %.2f us CPU/review, "
          "%zu-byte request)\n",
          whole ? " (whole document)" : "", n / s, s / n * 1e6, cpu / n * 1e6, sizeof(kReview) - 1);
    }
    if (bytes == 0) return 1;
  }
  if (handler_only) return 0;

  char tmpl[] = "/tmp/webhook-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  std::string dir = tmpl;
  auto ca = dra::webhook::testing::GenerateCa("bench-ca");
  if (!ca.ok()) return 1;
  auto leaf = dra::webhook::testing::GenerateServerCert(*ca, "webhook", {"127.0.0.1"});
  if (!leaf.ok()) return 1;
  std::ofstream(dir + "/tls.crt") << leaf->cert << ca->cert;
  std::ofstream(dir + "/tls.key") << leaf->key;
  auto certs = dra::webhook::ServingCertificate::Load({dir + "/tls.crt", dir + "/tls.key"});
  if (!certs.ok()) {
    std::fprintf(stderr, "%s\n", std::string(certs.status().message()).c_str());
    return 1;
  }
  dra::metrics::Registry registry;
  dra::webhook::WebhookMetrics metrics(&registry);
  dra::webhook::HttpsServerOptions options;
  options.address = "127.0.0.1:0";
  auto server = dra::webhook::StartHttpsServer(options, certs->get(),
                                               dra::webhook::MakeWebhookHandler(&gates, &metrics));
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("server: in-process, TLS 1.3, ECDSA P-256, %ld CPUs online\n",
              sysconf(_SC_NPROCESSORS_ONLN));
  for (int clients : client_counts) {
    RunResult r = Run((*server)->port(), ca->cert, clients, seconds);
    std::vector<double>& lat = r.latencies_us;
    double p50 = Percentile(lat, 0.50);
    double p99 = Percentile(lat, 0.99);
    double reviews = static_cast<double>(std::max<uint64_t>(r.reviews, 1));
    std::printf(
        "clients=%-3d reviews=%-8llu %.0f reviews/s  p50=%.0f us  p99=%.0f us  errors=%llu  "
        "CPU/review: server %.1f us, process %.1f us\n",
        clients, static_cast<unsigned long long>(r.reviews),
        static_cast<double>(r.reviews) / r.seconds, p50, p99,
        static_cast<unsigned long long>(r.errors), r.server_cpu / reviews * 1e6,
        r.process_cpu / reviews * 1e6);
    std::fflush(stdout);
  }
  (*server)->Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
