// bench/podstart: the pod-start overhead of a GPU claim on a real node. Against the local cluster
// with the Helm-installed driver (bench/podstart/run.sh), it starts N pods with one GPU claim each
// (from a ResourceClaimTemplate, as workloads do) and N identical pods without claims, alternating
// one of each, one pod at a time, each deleted (and gone) before the next. It prints p50/p95 of
// pod create -> Running for both, their ratio against the budget (<= 1.15), and where the extra
// time of the GPU pods goes:
//   scheduling   create -> spec.nodeName set (claim from the template, allocation, binding);
//   node start   nodeName -> PodReadyToStartContainers (kubelet admission, DRA prepare, sandbox);
//   containers   sandbox -> Running (container create and start; CDI injection by containerd);
//   prepare      the plugin's own NodePrepareResources time (its request-duration histogram) and
//                the kubelet's (dra_operations_duration_seconds), both averaged over the run.
// Times are when the bench's watch saw each change (milliseconds), so each stage also holds the
// kubelet's status-update delay, alike for both kinds of pod.
//
// Usage: podstart_bench --kubeconfig PATH --node NODE --image IMAGE [--pods 20]
//                       [--driver-namespace nvidia-dra-driver-gpu] [--device-class gpu.nvidia.com]

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/podstart/pod_timeline.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/rest_config.h"

namespace {

using dra::bench::Percentile;
using dra::bench::PodTimeline;
using dra::bench::StageMs;
using nlohmann::json;

constexpr absl::Duration kPodTimeout = absl::Seconds(120);
constexpr dra::k8s::ResourceInfo kNamespaces{"", "v1", "Namespace", "namespaces", false};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "podstart_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().message()));
  return *std::move(v);
}

struct Flags {
  std::string kubeconfig;
  std::string node;
  std::string image;
  std::string driver_namespace = "nvidia-dra-driver-gpu";
  std::string device_class = "gpu.nvidia.com";
  int pods = 20;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  if (const char* k = std::getenv("KUBECONFIG")) f.kubeconfig = k;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Die(absl::StrCat(a, ": needs a value"));
    const std::string v = argv[++i];
    if (a == "--kubeconfig") {
      f.kubeconfig = v;
    } else if (a == "--node") {
      f.node = v;
    } else if (a == "--image") {
      f.image = v;
    } else if (a == "--driver-namespace") {
      f.driver_namespace = v;
    } else if (a == "--device-class") {
      f.device_class = v;
    } else if (a == "--pods") {
      f.pods = std::atoi(v.c_str());
    } else {
      Die(absl::StrCat("unknown flag ", a));
    }
  }
  if (f.kubeconfig.empty() || f.node.empty() || f.image.empty()) {
    Die("--kubeconfig (or $KUBECONFIG), --node and --image are required");
  }
  if (f.pods < 1 || f.pods > 1000) Die("--pods: a number from 1 to 1000");
  return f;
}

json PodObject(const Flags& f, const std::string& name, bool gpu) {
  json ctr = {{"name", "ctr"},
              {"image", f.image},
              {"imagePullPolicy", "Never"},
              {"command", {"sh", "-c", "trap 'exit 0' TERM; sleep 9999 & wait"}}};
  json spec = {{"restartPolicy", "Never"},
               {"terminationGracePeriodSeconds", 1},
               {"nodeSelector", {{"kubernetes.io/hostname", f.node}}}};
  if (gpu) {
    spec["resourceClaims"] = {{{"name", "gpu"}, {"resourceClaimTemplateName", "one-gpu"}}};
    ctr["resources"] = {{"claims", {{{"name", "gpu"}}}}};
  }
  spec["containers"] = {ctr};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", {{"podstart", gpu ? "gpu" : "plain"}}}}},
          {"spec", spec}};
}

// Pod timelines fed by a watch on the bench's namespace.
class Watcher {
 public:
  Watcher(dra::k8s::Client* client, std::string ns) : client_(client), ns_(std::move(ns)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Watcher() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  void Created(const std::string& name, absl::Time t) {
    absl::MutexLock lock(&mu_);
    pods_[name].created = t;
  }
  // Waits until `name` runs (or fails, or the timeout); returns its timeline.
  PodTimeline WaitRunning(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const PodTimeline& t = pods_[name];
      return t.running.has_value() || !t.failure.empty();
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), kPodTimeout)) {
      pods_[name].failure = absl::StrCat("not Running after ", absl::FormatDuration(kPodTimeout));
    }
    return pods_[name];
  }
  // Waits until `name` is deleted.
  bool WaitGone(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto gone = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return gone_.contains(name); };
    return mu_.AwaitWithTimeout(absl::Condition(&gone), kPodTimeout);
  }

 private:
  void Run() {
    std::string rv;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
      }
      absl::Status s = client_->Watch(
          dra::k8s::Pod::kResource, ns_, {.resource_version = rv, .timeout_seconds = 60},
          [this, &rv](dra::k8s::WatchEvent&& e) {
            const absl::Time seen = absl::Now();
            rv = e.object["metadata"].value("resourceVersion", rv);
            if (e.type == dra::k8s::WatchEvent::Type::kBookmark) return true;
            const std::string name = e.object["metadata"].value("name", "");
            absl::MutexLock lock(&mu_);
            if (e.type == dra::k8s::WatchEvent::Type::kDeleted) {
              gone_.insert(name);
            } else {
              pods_[name].Observe(e.object, seen);
            }
            return true;
          },
          [this] {
            absl::MutexLock lock(&mu_);
            return stop_;
          });
      if (!s.ok()) rv.clear();  // too old or a broken connection: start over (ADDED events)
      if (!s.ok()) absl::SleepFor(absl::Milliseconds(100));
    }
  }

  dra::k8s::Client* const client_;
  const std::string ns_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, PodTimeline> pods_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> gone_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The plugin's and the kubelet's cumulative prepare time and count on the node.
struct PrepareCounters {
  std::optional<double> plugin_sum, plugin_count, kubelet_sum, kubelet_count;
};

PrepareCounters ReadPrepareCounters(dra::k8s::Client* client, const Flags& f) {
  PrepareCounters c;
  auto pods = client->ListAll(dra::k8s::Pod::kResource, f.driver_namespace,
                              {.field_selector = "spec.nodeName=" + f.node});
  if (pods.ok()) {
    for (const auto& p : (*pods)["items"]) {
      const std::string name = p["metadata"].value("name", "");
      if (name.find("kubelet-plugin") == std::string::npos) continue;
      auto text = client->GetRaw(absl::StrCat("/api/v1/namespaces/", f.driver_namespace, "/pods/",
                                              name, ":8080/proxy/metrics"));
      if (!text.ok()) continue;
      const std::map<std::string, std::string> l = {{"operation", "prepare"}};
      c.plugin_sum = dra::bench::SumSamples(*text, "nvidia_dra_request_duration_seconds_sum", l);
      c.plugin_count =
          dra::bench::SumSamples(*text, "nvidia_dra_request_duration_seconds_count", l);
    }
  }
  auto text = client->GetRaw(absl::StrCat("/api/v1/nodes/", f.node, "/proxy/metrics"));
  if (text.ok()) {
    const std::map<std::string, std::string> l = {{"operation_name", "PrepareResources"}};
    c.kubelet_sum = dra::bench::SumSamples(*text, "dra_operations_duration_seconds_sum", l);
    c.kubelet_count = dra::bench::SumSamples(*text, "dra_operations_duration_seconds_count", l);
  }
  return c;
}

std::string MeanMs(std::optional<double> sum0, std::optional<double> n0, std::optional<double> sum1,
                   std::optional<double> n1) {
  if (!sum0 || !n0 || !sum1 || !n1 || *n1 <= *n0) return "n/a";
  return absl::StrCat(std::lround((*sum1 - *sum0) / (*n1 - *n0) * 1000), " ms (",
                      std::lround(*n1 - *n0), " calls)");
}

struct Samples {
  std::vector<double> total, sched, node, ctrs;
  void Add(const PodTimeline& t) {
    if (auto v = StageMs(t.created, t.running)) total.push_back(*v);
    if (auto v = StageMs(t.created, t.bound)) sched.push_back(*v);
    if (auto v = StageMs(t.bound, t.sandbox)) node.push_back(*v);
    if (auto v = StageMs(t.sandbox, t.running)) ctrs.push_back(*v);
  }
};
}  // namespace

int main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  auto rest = Check(dra::k8s::LoadKubeconfig(f.kubeconfig), "kubeconfig");
  auto client = Check(dra::k8s::Client::Create(rest, {.qps = 0}), "client");
  const std::string ns = absl::StrCat("podstart-", getpid());
  Check(client->Create(kNamespaces, "", {{"metadata", {{"name", ns}}}}), "namespace " + ns);
  json tmpl = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaimTemplate"},
      {"metadata", {{"name", "one-gpu"}}},
      {"spec",
       {{"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", f.device_class}}}}}}}}}}}}};
  Check(client->Create(dra::k8s::ResourceClaimTemplate::kResource, ns, tmpl), "claim template");

  const PrepareCounters before = ReadPrepareCounters(client.get(), f);
  Samples gpu, plain;
  std::vector<std::string> failures;
  {
    Watcher watcher(client.get(), ns);
    absl::SleepFor(absl::Milliseconds(500));  // the watch is open before the first create
    for (int i = 0; i < f.pods; ++i) {
      // Alternate which kind goes first, so neither always follows the other's teardown.
      for (bool with_gpu : {i % 2 == 0, i % 2 != 0}) {
        const std::string name = absl::StrCat(with_gpu ? "gpu-" : "plain-", i);
        watcher.Created(name, absl::Now());
        Check(client->Create(dra::k8s::Pod::kResource, ns, PodObject(f, name, with_gpu)), name);
        PodTimeline t = watcher.WaitRunning(name);
        if (!t.failure.empty()) failures.push_back(absl::StrCat(name, ": ", t.failure));
        (with_gpu ? gpu : plain).Add(t);
        // Graceful (the pod's 1 s): the Pod object stays until the kubelet has stopped it and
        // unprepared its claim. With a forced delete the claim is deallocated at once and the
        // next GPU pod may be given the same GPU while the plugin still holds it prepared for
        // the old claim ("already allocated to different claim", retried by the kubelet).
        (void)client->Delete(dra::k8s::Pod::kResource, ns, name);
        if (!watcher.WaitGone(name)) failures.push_back(name + ": not deleted in time");
      }
    }
  }
  const PrepareCounters after = ReadPrepareCounters(client.get(), f);
  (void)client->Delete(kNamespaces, "", ns);

  std::printf(
      "podstart_bench: node %s, %d pods with one GPU claim (template) and %d without, "
      "alternating, one at a time\n",
      f.node.c_str(), f.pods, f.pods);
  auto row = [](const char* what, const std::vector<double>& g, const std::vector<double>& p) {
    std::printf("  %-34s gpu p50 %6.0f p95 %6.0f | plain p50 %6.0f p95 %6.0f | extra p50 %+6.0f\n",
                what, Percentile(g, 0.5), Percentile(g, 0.95), Percentile(p, 0.5),
                Percentile(p, 0.95), Percentile(g, 0.5) - Percentile(p, 0.5));
  };
  std::printf("  stage (ms)\n");
  row("create -> Running", gpu.total, plain.total);
  row("  scheduling (create -> bound)", gpu.sched, plain.sched);
  row("  node start (bound -> sandbox)", gpu.node, plain.node);
  row("  containers (sandbox -> Running)", gpu.ctrs, plain.ctrs);
  std::printf(
      "  NodePrepareResources mean: plugin %s, kubelet %s\n",
      MeanMs(before.plugin_sum, before.plugin_count, after.plugin_sum, after.plugin_count).c_str(),
      MeanMs(before.kubelet_sum, before.kubelet_count, after.kubelet_sum, after.kubelet_count)
          .c_str());
  const double p50 = Percentile(plain.total, 0.5), p95 = Percentile(plain.total, 0.95);
  const double r50 = p50 > 0 ? Percentile(gpu.total, 0.5) / p50 : 0;
  const double r95 = p95 > 0 ? Percentile(gpu.total, 0.95) / p95 : 0;
  std::printf("  ratio gpu/plain: p50 %.2f, p95 %.2f (budget <= 1.15; physical limit 1.00): %s\n",
              r50, r95, r50 <= 1.15 && r95 <= 1.15 ? "within budget" : "OVER BUDGET");
  std::printf("  samples: gpu %zu, plain %zu, failures %zu\n", gpu.total.size(), plain.total.size(),
              failures.size());
  for (const std::string& s : failures) std::printf("  failure: %s\n", s.c_str());
  return failures.empty() ? 0 : 1;
}
