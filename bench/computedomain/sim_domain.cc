#include "bench/computedomain/sim_domain.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "lib/cdplugin/imex_config_template.h"
#include "lib/k8s/objects_apps.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"
#include "lib/k8s/rest_config.h"
#include "test/support/namespaces.h"

namespace dra::bench {
namespace {

constexpr k8s::ResourceInfo kNamespace{"", "v1", "Namespace", "namespaces", false};
constexpr k8s::ResourceInfo kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
constexpr char kBenchLabel[] = "dra.bench/computedomain";
constexpr k8s::ResourceInfo kPolicy{"admissionregistration.k8s.io", "v1",
                                    "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
                                    false};
constexpr k8s::ResourceInfo kPolicyBinding{"admissionregistration.k8s.io", "v1",
                                           "ValidatingAdmissionPolicyBinding",
                                           "validatingadmissionpolicybindings", false};

double ChildCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

// Runs `fn(i)` for i in [0, n) on `workers` threads.
void ParallelFor(int n, int workers, const std::function<void(int)>& fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> t;
  for (int w = 0; w < std::min(workers, std::max(n, 1)); ++w) {
    t.emplace_back([&] {
      for (int i = next++; i < n; i = next++) fn(i);
    });
  }
  for (std::thread& x : t) x.join();
}

}  // namespace

SimDomain::SimDomain(SimOptions options) : o_(std::move(options)) {
  std::mt19937 rng(std::random_device{}());
  run_id_ = absl::StrFormat("%06x", rng() & 0xffffff);
  driver_ns_ = absl::StrCat("cdbench-drv-", run_id_);
  cd_ns_ = absl::StrCat("cdbench-cd-", run_id_);
  cluster_uuid_ = absl::StrFormat("bec0ffee-0000-4000-8000-0000%08x", rng());
  dir_ = absl::StrCat(o_.work_dir, "/cdbench-", run_id_);
}

SimDomain::~SimDomain() { Cleanup(); }

void SimDomain::Count(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  bench_counts_[key] += 1;
}

absl::Status SimDomain::Setup() {
  auto rest = k8s::LoadKubeconfig(o_.kubeconfig);
  if (!rest.ok()) return rest.status();
  // The bench's own client is not rate limited: its requests are not what is measured.
  auto client = k8s::Client::Create(*rest, {.qps = 0});
  if (!client.ok()) return client.status();
  client_ = std::move(*client);
  std::filesystem::create_directories(dir_);
  for (const std::string& ns : {driver_ns_, cd_ns_}) {
    absl::Status made = dra::testing::CreateNamespaceForPods(
        client_.get(), {{"metadata", {{"name", ns}, {"labels", {{kBenchLabel, run_id_}}}}}});
    if (!made.ok()) return made;
  }
  if (absl::Status s = FenceOtherControllers(); !s.ok()) return s;
  // The daemon pods' controller. A DaemonSet pod is controlled by its DaemonSet; without a
  // controller the domain's DaemonSet (whose selector the pods match) would adopt them and delete
  // them, as pods on nodes it does not select (kube-controller-manager's DELETE pods).
  Count("POST configmaps");
  auto owner = client_->Create(kConfigMaps, driver_ns_, {{"metadata", {{"name", "pod-owner"}}}});
  if (!owner.ok()) return owner.status();
  pod_owner_uid_ = (*owner)["metadata"]["uid"];
  for (int i = 0; i < o_.nodes; ++i) {
    auto n = std::make_unique<Node>();
    n->i = i;
    n->node_name = absl::StrCat("cdbench-", run_id_, "-node-", i);
    n->ip = absl::StrCat("127.77.", i / 200, ".", i % 200 + 10);
    n->clique_id = absl::StrCat(cluster_uuid_, ".", i / o_.clique_size);
    n->dir = absl::StrCat(dir_, "/node-", i);
    nodes_.push_back(std::move(n));
  }
  // Node objects: no kubelet posts their status; unschedulable and tainted so that nothing else
  // lands on them. The pod garbage collector deletes pods bound to nodes that do not exist, so
  // the nodes must.
  std::atomic<bool> failed{false};
  std::string error;
  ParallelFor(o_.nodes, o_.start_workers, [&](int i) {
    const Node& n = *nodes_[i];
    nlohmann::json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata", {{"name", n.node_name}, {"labels", {{kBenchLabel, run_id_}}}}},
        {"spec",
         {{"unschedulable", true},
          {"taints", {{{"key", kBenchLabel}, {"value", run_id_}, {"effect", "NoSchedule"}}}}}}};
    auto made = client_->Create(k8s::Node::kResource, "", node);
    if (!made.ok() && !failed.exchange(true)) error = std::string(made.status().message());
  });
  nodes_created_ = true;
  if (failed) return absl::InternalError(absl::StrCat("create nodes: ", error));
  return StartControllers();
}

absl::Status SimDomain::StartControllers() {
  if (o_.controllers <= 1) return StartController();
  // The first one takes the lease (it logs "informer caches synced" only as the leader); the
  // standbys then wait for it.
  for (int k = 0; k < o_.controllers; ++k) {
    const std::string id = absl::StrCat("bench-", k);
    const std::string log = absl::StrCat(dir_, "/controller-", k, ".log");
    std::vector<std::string> argv = {o_.controller_binary,
                                     "--kubeconfig=" + o_.kubeconfig,
                                     "--namespace=" + driver_ns_,
                                     "--pod-name=" + id,
                                     "--image-name=x",
                                     "--log-verbosity-cd-daemon=0",
                                     "--watch-namespace=" + cd_ns_,
                                     absl::StrCat("--kube-api-qps=", o_.controller_qps),
                                     absl::StrCat("--kube-api-burst=", o_.controller_burst),
                                     absl::StrCat("--max-nodes-per-imex-domain=", o_.clique_size),
                                     "--leader-election-enabled",
                                     "--leader-election-lease-lock-namespace=" + driver_ns_,
                                     "--leader-election-lease-lock-name=cdc-leader",
                                     "--leader-election-lease-duration=4s",
                                     "--leader-election-renew-deadline=3s",
                                     "--leader-election-retry-period=1s"};
    pid_t pid = Spawn(argv, {}, log, /*own_group=*/true);
    if (pid < 0) return absl::InternalError("cannot start " + o_.controller_binary);
    if (k == 0) {
      controller_pid_ = pid;
      controller_log_ = log;
    }
    controller_pids_.push_back(pid);
    controller_ids_[pid] = id;
    if (k > 0) continue;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (;;) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (absl::StrContains(text, "informer caches synced")) break;
      if (!ReadProcStats(pid).alive || absl::Now() > deadline) {
        return absl::InternalError("leader controller did not start; log " + log);
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  return absl::OkStatus();
}

// A compute-domain-controller installed in the cluster (the e2e suite's Helm release watches all
// namespaces) would reconcile the bench's domain too: it writes the domain's status from its own
// (empty) cliques, and the two controllers overwrite each other. An admission policy limited to
// this run's namespaces refuses updates of their ComputeDomains by service accounts (in-cluster
// controllers); the bench's controller uses the admin kubeconfig.
absl::Status SimDomain::FenceOtherControllers() {
  policy_name_ = absl::StrCat("cdbench-", run_id_);
  nlohmann::json policy = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingAdmissionPolicy"},
      {"metadata", {{"name", policy_name_}, {"labels", {{kBenchLabel, run_id_}}}}},
      {"spec",
       {{"failurePolicy", "Fail"},
        {"matchConstraints",
         {{"namespaceSelector", {{"matchLabels", {{kBenchLabel, run_id_}}}}},
          {"resourceRules",
           {{{"apiGroups", {"resource.nvidia.com"}},
             {"apiVersions", {"*"}},
             {"operations", {"UPDATE"}},
             {"resources", {"computedomains", "computedomains/status"}}}}}}},
        {"validations",
         {{{"expression", "!request.userInfo.username.startsWith('system:serviceaccount:')"},
           {"message",
            "computedomain_bench: this ComputeDomain is reconciled by the bench's own "
            "controller"}}}}}}};
  if (auto made = client_->Create(kPolicy, "", policy); !made.ok()) return made.status();
  nlohmann::json binding = {
      {"apiVersion", "admissionregistration.k8s.io/v1"},
      {"kind", "ValidatingAdmissionPolicyBinding"},
      {"metadata", {{"name", policy_name_}, {"labels", {{kBenchLabel, run_id_}}}}},
      {"spec", {{"policyName", policy_name_}, {"validationActions", {"Deny"}}}}};
  if (auto made = client_->Create(kPolicyBinding, "", binding); !made.ok()) return made.status();
  // The API server loads policies through an informer: give it a moment.
  absl::SleepFor(absl::Seconds(2));
  return absl::OkStatus();
}

absl::Status SimDomain::StartController() {
  controller_log_ = dir_ + "/controller.log";
  std::vector<std::string> argv = {o_.controller_binary,
                                   "--kubeconfig=" + o_.kubeconfig,
                                   "--namespace=" + driver_ns_,
                                   "--pod-name=bench",
                                   "--image-name=x",
                                   "--log-verbosity-cd-daemon=0",
                                   "--watch-namespace=" + cd_ns_,
                                   absl::StrCat("--kube-api-qps=", o_.controller_qps),
                                   absl::StrCat("--kube-api-burst=", o_.controller_burst),
                                   absl::StrCat("--max-nodes-per-imex-domain=", o_.clique_size)};
  controller_pid_ = Spawn(argv, {}, controller_log_, /*own_group=*/true);
  if (controller_pid_ < 0) return absl::InternalError("cannot start " + o_.controller_binary);
  controller_pids_.push_back(controller_pid_);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::ifstream in(controller_log_);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (absl::StrContains(text, "informer caches synced")) return absl::OkStatus();
    if (!ReadProcStats(controller_pid_).alive || absl::StrContains(text, "failed")) {
      return absl::InternalError("controller did not start; log " + controller_log_);
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError("controller caches not synced in 30s; log " + controller_log_);
}

std::vector<std::string> SimDomain::DaemonArgs(const Node& n, const std::string& command) const {
  return {o_.daemon_binary,
          "--cliqueid=" + n.clique_id,
          "--compute-domain-uuid=" + cd_uid_,
          "--compute-domain-name=" + cd_name_,
          "--compute-domain-namespace=" + cd_ns_,
          "--node-name=" + n.node_name,
          "--pod-ip=" + n.ip,
          "--pod-uid=" + n.pod_uid,
          "--pod-name=" + n.pod_name,
          "--pod-namespace=" + driver_ns_,
          absl::StrCat("--max-nodes-per-imex-domain=", o_.clique_size),
          "--imexd-dir=" + n.dir + "/imexd",
          "--hosts-file=" + n.dir + "/hosts",
          "--imex-binary=" + o_.imex_binary,
          "--imex-ctl-binary=" + o_.imex_ctl_binary,
          "--imex-stop-timeout=2s",
          "--kubeconfig=" + o_.kubeconfig,
          command};
}

absl::Status SimDomain::StartNode(Node& n) {
  n.pod_name = absl::StrCat("computedomain-daemon-", cd_uid_.substr(0, 8), "-", n.i);
  nlohmann::json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", n.pod_name},
        {"namespace", driver_ns_},
        {"labels", {{std::string(k8s::kComputeDomainLabel), cd_uid_}, {kBenchLabel, run_id_}}},
        {"ownerReferences",
         {{{"apiVersion", "v1"},
           {"kind", "ConfigMap"},
           {"name", "pod-owner"},
           {"uid", pod_owner_uid_},
           {"controller", true}}}}}},
      {"spec",
       {{"nodeName", n.node_name},
        {"tolerations", {{{"operator", "Exists"}}}},
        {"containers", {{{"name", "compute-domain-daemon"}, {"image", "x"}}}}}}};
  Count("POST pods");
  auto made = client_->Create(k8s::Pod::kResource, driver_ns_, pod);
  if (!made.ok()) return made.status();
  n.pod_uid = (*made)["metadata"]["uid"];
  // What the kubelet reports once the container runs and before the probe passed.
  nlohmann::json status = {{"status",
                            {{"phase", "Running"},
                             {"podIP", n.ip},
                             {"podIPs", {{{"ip", n.ip}}}},
                             {"conditions",
                              {{{"type", "PodScheduled"}, {"status", "True"}},
                               {{"type", "Ready"}, {"status", "False"}}}}}}};
  Count("PATCH pods/status");
  auto patched = client_->MergePatch(k8s::Pod::kResource, driver_ns_, n.pod_name, status, "status");
  if (!patched.ok()) return patched.status();
  // What the kubelet plugin's daemon-claim prepare writes, and the container's /etc/hosts.
  std::filesystem::create_directories(n.dir + "/imexd");
  std::ofstream(n.dir + "/imexd/imexd.cfg.tmpl") << cdplugin::ImexConfigTemplate();
  std::ofstream(n.dir + "/hosts") << "127.0.0.1\tlocalhost\n" << n.ip << "\t" << n.pod_name << "\n";
  n.pid = Spawn(DaemonArgs(n, "run"), {"FAKE_IMEX_HOSTS_FILE=" + n.dir + "/hosts"},
                n.dir + "/daemon.log", /*own_group=*/true);
  if (n.pid < 0) return absl::InternalError("cannot start " + o_.daemon_binary);
  n.started = true;
  return absl::OkStatus();
}

void SimDomain::ProbeLoop(int worker) {
  // Linux nice values are per thread and inherited by the children this thread spawns.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), o_.probe_nice);
  while (!done_ && !o_.stopped()) {
    bool ran = false;
    for (size_t i = worker; i < nodes_.size(); i += o_.probe_workers) {
      Node& n = *nodes_[i];
      if (!n.started || n.probe_passed || absl::Now() < n.next_probe) continue;
      ran = true;
      n.next_probe = absl::Now() + o_.probe_period;
      pid_t pid = Spawn(DaemonArgs(n, "check"), {"FAKE_IMEX_HOSTS_FILE=" + n.dir + "/hosts"},
                        n.dir + "/check.log", /*own_group=*/false);
      int rc = WaitOrKill(pid, absl::Seconds(10), false);
      {
        std::lock_guard<std::mutex> l(mu_);
        ++probes_run_;
        if (rc != 0) ++probes_failed_;
      }
      if (rc != 0) continue;
      nlohmann::json ready = {{"status",
                               {{"conditions",
                                 {{{"type", "PodScheduled"}, {"status", "True"}},
                                  {{"type", "ContainersReady"}, {"status", "True"}},
                                  {{"type", "Ready"}, {"status", "True"}}}}}}};
      Count("PATCH pods/status");
      auto patched =
          client_->MergePatch(k8s::Pod::kResource, driver_ns_, n.pod_name, ready, "status");
      if (!patched.ok()) {
        std::fprintf(stderr, "computedomain_bench: set %s Ready: %s\n", n.pod_name.c_str(),
                     std::string(patched.status().message()).c_str());
        continue;
      }
      n.probe_passed = true;
      std::lock_guard<std::mutex> l(mu_);
      probe_at_.push_back(Since(absl::Now()));
    }
    if (!ran) absl::SleepFor(absl::Milliseconds(20));
  }
}

void SimDomain::WatchDomain() {
  auto stop = [this] { return done_.load() || o_.stopped(); };
  while (!stop()) {
    Count("WATCH computedomains");
    absl::Status s = client_->Watch(
        k8s::ComputeDomain::kResource, cd_ns_,
        {.field_selector = "metadata.name=" + cd_name_, .timeout_seconds = 60},
        [this](k8s::WatchEvent&& e) {
          if (e.type == k8s::WatchEvent::Type::kBookmark) return true;
          auto cd = k8s::ComputeDomain::FromJson(e.object);
          if (!cd.ok()) return true;
          if (cd->status.status == k8s::kComputeDomainStatusReady &&
              static_cast<int>(cd->status.nodes.size()) == o_.nodes) {
            std::lock_guard<std::mutex> l(mu_);
            if (domain_ready_at_ < 0) domain_ready_at_ = Since(absl::Now());
            return false;
          }
          return true;
        },
        stop);
    std::lock_guard<std::mutex> l(mu_);
    if (domain_ready_at_ >= 0) return;
    if (!s.ok()) absl::SleepFor(absl::Milliseconds(100));
  }
}

void SimDomain::WatchCliques() {
  auto stop = [this] { return done_.load() || o_.stopped(); };
  while (!stop()) {
    Count("WATCH computedomaincliques");
    (void)client_->Watch(
        k8s::ComputeDomainClique::kResource, driver_ns_,
        {.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", cd_uid_),
         .timeout_seconds = 60},
        [this](k8s::WatchEvent&& e) {
          if (e.type == k8s::WatchEvent::Type::kBookmark) return true;
          auto c = k8s::ComputeDomainClique::FromJson(e.object);
          if (!c.ok()) return true;
          const double now = Since(absl::Now());
          std::lock_guard<std::mutex> l(mu_);
          for (const auto& d : c->daemons) {
            registered_at_.emplace(d.node_name, now);
            if (d.status == k8s::kComputeDomainStatusReady)
              entry_ready_at_.emplace(d.node_name, now);
          }
          return true;
        },
        stop);
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::Status SimDomain::CreateBindingClaim(int i) {
  const std::string name = absl::StrCat("bench-claim-", i);
  const std::string& node = nodes_[i]->node_name;
  nlohmann::json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", name}, {"namespace", cd_ns_}}},
      {"spec",
       {{"devices",
         {{"requests",
           {{{"name", "channel"},
             {"exactly",
              {{"deviceClassName", "compute-domain-default-channel.nvidia.com"}}}}}}}}}}};
  Count("POST resourceclaims");
  auto made = client_->Create(k8s::ResourceClaim::kResource, cd_ns_, claim);
  if (!made.ok()) {
    return absl::InternalError(
        absl::StrCat("create ResourceClaim ", name, ": ", made.status().message()));
  }
  // What the scheduler writes: channel-0 of the node with the slice's binding conditions and the
  // workload template's config.
  nlohmann::json status = *made;
  status["status"]["allocation"] = {
      {"devices",
       {{"results",
         {{{"request", "channel"},
           {"driver", std::string(k8s::kComputeDomainDriverName)},
           {"pool", node},
           {"device", "channel-0"},
           {"bindingConditions", {std::string(k8s::kChannelBindingCondition)}},
           {"bindingFailureConditions", {std::string(k8s::kChannelBindingFailureCondition)}}}}},
        {"config",
         {{{"source", "FromClaim"},
           {"requests", {"channel"}},
           {"opaque",
            {{"driver", std::string(k8s::kComputeDomainDriverName)},
             {"parameters",
              {{"apiVersion", "resource.nvidia.com/v1beta1"},
               {"kind", "ComputeDomainChannelConfig"},
               {"domainID", cd_uid_},
               {"allocationMode", "Single"}}}}}}}}}},
      {"nodeSelector",
       {{"nodeSelectorTerms",
         {{{"matchFields",
            {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}}}}}}}},
      {"allocationTimestamp",
       absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())}};
  Count("PUT resourceclaims/status");
  auto allocated = client_->UpdateStatus(k8s::ResourceClaim::kResource, cd_ns_, status);
  if (!allocated.ok()) {
    return absl::InternalError(
        absl::StrCat("allocate ResourceClaim ", name, ": ", allocated.status().message()));
  }
  return absl::OkStatus();
}

void SimDomain::WatchClaims() {
  auto stop = [this] { return done_.load() || o_.stopped(); };
  while (!stop()) {
    Count("WATCH resourceclaims");
    (void)client_->Watch(
        k8s::ResourceClaim::kResource, cd_ns_, {.timeout_seconds = 60},
        [this](k8s::WatchEvent&& e) {
          if (e.type == k8s::WatchEvent::Type::kBookmark) return true;
          auto c = k8s::ResourceClaim::FromJson(e.object);
          if (!c.ok()) return true;
          for (const k8s::AllocatedDeviceStatus& d : c->status.devices) {
            if (!d.conditions.is_array()) continue;
            for (const nlohmann::json& cond : d.conditions) {
              if (cond.value("type", "") == k8s::kChannelBindingCondition &&
                  cond.value("status", "") == "True") {
                std::lock_guard<std::mutex> l(mu_);
                claim_bound_at_.emplace(c->metadata.name, Since(absl::Now()));
              }
            }
          }
          return true;
        },
        stop);
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::Status SimDomain::CreateDomain() {
  nlohmann::json cd = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                       {"kind", "ComputeDomain"},
                       {"metadata", {{"name", cd_name_}, {"namespace", cd_ns_}}},
                       {"spec",
                        {{"numNodes", o_.num_nodes >= 0 ? o_.num_nodes : o_.nodes},
                         {"channel", {{"resourceClaimTemplate", {{"name", "bench-channel"}}}}}}}};
  t0_ = absl::Now();
  Count("POST computedomains");
  auto made = client_->Create(k8s::ComputeDomain::kResource, cd_ns_, cd);
  if (!made.ok())
    return absl::InternalError(absl::StrCat("create ComputeDomain: ", made.status().message()));
  cd_uid_ = (*made)["metadata"]["uid"];
  return absl::OkStatus();
}

void SimDomain::StartProbes() {
  for (int w = 0; w < o_.probe_workers; ++w) threads_.emplace_back([this, w] { ProbeLoop(w); });
}

SimResult SimDomain::Run() {
  SimResult r;
  r.nodes = o_.nodes;
  r.cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  if (absl::Status s = Setup(); !s.ok()) {
    r.failure = absl::StrCat("setup: ", s.message());
    return r;
  }
  const pid_t apiserver = FindProcess("kube-apiserver");
  const pid_t etcd = FindProcess("etcd");
  auto before = ScrapeRequestCounts(*client_);
  if (!before.ok()) {
    r.failure = absl::StrCat("scrape /metrics: ", before.status().message());
    return r;
  }
  const double api_cpu0 = ReadProcStats(apiserver).cpu_seconds;
  const double etcd_cpu0 = ReadProcStats(etcd).cpu_seconds;
  const double child_cpu0 = ChildCpuSeconds();
  const CpuTimes cpu0 = MachineCpu();

  if (absl::Status s = CreateDomain(); !s.ok()) {
    r.failure = std::string(s.message());
    return r;
  }
  threads_.emplace_back([this] { WatchDomain(); });
  threads_.emplace_back([this] { WatchCliques(); });
  if (o_.binding_claims) threads_.emplace_back([this] { WatchClaims(); });
  StartProbes();

  std::string start_error;
  std::mutex start_mu;
  ParallelFor(o_.nodes, o_.start_workers, [&](int i) {
    if (o_.stopped()) return;
    absl::Status s = o_.binding_claims ? CreateBindingClaim(i) : absl::OkStatus();
    if (s.ok()) s = StartNode(*nodes_[i]);
    if (!s.ok()) {
      std::lock_guard<std::mutex> l(start_mu);
      if (start_error.empty()) start_error = absl::StrCat(nodes_[i]->node_name, ": ", s.message());
    }
  });
  r.phases.pods_started = Since(absl::Now());
  if (!start_error.empty()) r.failure = "start node " + start_error;

  const absl::Time deadline = t0_ + o_.timeout;
  while (r.failure.empty() && !o_.stopped() && absl::Now() < deadline) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (domain_ready_at_ >= 0 &&
          (!o_.binding_claims || static_cast<int>(claim_bound_at_.size()) == o_.nodes)) {
        break;
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  auto after = ScrapeRequestCounts(*client_);
  r.apiserver_cpu_seconds = ReadProcStats(apiserver).cpu_seconds - api_cpu0;
  r.etcd_cpu_seconds = ReadProcStats(etcd).cpu_seconds - etcd_cpu0;
  const CpuTimes cpu1 = MachineCpu();
  r.machine_busy_fraction = cpu1.total > cpu0.total
                                ? static_cast<double>(cpu1.busy - cpu0.busy) /
                                      static_cast<double>(cpu1.total - cpu0.total)
                                : 0;
  r.load_1m = LoadAverage1m();
  r.controller = ReadProcStats(controller_pid_);
  for (const auto& n : nodes_) {
    if (n->pid <= 0) continue;
    r.daemons.push_back(ReadProcStats(n->pid));
    for (pid_t c : ChildrenOf(n->pid)) r.imex.push_back(ReadProcStats(c));
  }
  done_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  r.probe_cpu_seconds = ChildCpuSeconds() - child_cpu0;

  std::lock_guard<std::mutex> l(mu_);
  if (after.ok()) r.requests = after->Minus(*before);
  for (const auto& [k, v] : bench_counts_) {
    if (absl::StartsWith(k, "WATCH ")) {
      r.bench_requests.open_watches[k] = 1;  // one open at a time
    } else {
      r.bench_requests.total[k] = v;
    }
  }
  r.probes_run = probes_run_;
  r.probes_failed = probes_failed_;
  r.ready = domain_ready_at_ >= 0;
  r.phases.domain_ready = domain_ready_at_;
  auto last = [](const std::map<std::string, double>& m, std::vector<double>* all) {
    double mx = -1;
    for (const auto& [k, v] : m) {
      all->push_back(v);
      mx = std::max(mx, v);
    }
    std::sort(all->begin(), all->end());
    return mx;
  };
  if (static_cast<int>(registered_at_.size()) == o_.nodes) {
    r.phases.registered = last(registered_at_, &r.phases.per_node_registered);
  } else {
    last(registered_at_, &r.phases.per_node_registered);
  }
  if (static_cast<int>(entry_ready_at_.size()) == o_.nodes) {
    r.phases.entries_ready = last(entry_ready_at_, &r.phases.per_node_entry_ready);
  } else {
    last(entry_ready_at_, &r.phases.per_node_entry_ready);
  }
  if (static_cast<int>(claim_bound_at_.size()) == o_.nodes) {
    r.phases.claims_bound = last(claim_bound_at_, &r.phases.per_node_claim_bound);
  } else {
    last(claim_bound_at_, &r.phases.per_node_claim_bound);
  }
  if (o_.binding_claims && r.failure.empty() && r.ready && r.phases.claims_bound < 0) {
    r.failure = absl::StrCat("only ", claim_bound_at_.size(), " of ", o_.nodes,
                             " claims reported IMEXDaemonReady within ",
                             absl::FormatDuration(o_.timeout), "; logs kept under ", dir_);
  }
  r.phases.per_node_probe = probe_at_;
  std::sort(r.phases.per_node_probe.begin(), r.phases.per_node_probe.end());
  if (static_cast<int>(probe_at_.size()) == o_.nodes)
    r.phases.probes_passed = r.phases.per_node_probe.back();
  if (r.failure.empty() && !r.ready) {
    r.failure = o_.stopped() ? "interrupted"
                             : absl::StrCat("not Ready within ", absl::FormatDuration(o_.timeout),
                                            "; logs kept under ", dir_);
  }
  if (!r.failure.empty()) keep_dir_ = true;
  return r;
}

void SimDomain::Cleanup() {
  if (cleaned_.exchange(true)) return;
  done_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (client_ == nullptr) return;
  const bool keep_logs = keep_dir_ || std::getenv("DRA_KEEP_BENCH_DIRS") != nullptr;
  // The domain first, while the controller runs: it removes its objects and the finalizer.
  if (!cd_uid_.empty()) {
    (void)client_->Delete(k8s::ComputeDomain::kResource, cd_ns_, cd_name_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline &&
           client_->Get(k8s::ComputeDomain::kResource, cd_ns_, cd_name_).ok()) {
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  for (const auto& n : nodes_) KillGroup(n->pid);  // the daemon and its nvidia-imex
  for (pid_t pid : controller_pids_) {
    if (!ReadProcStats(pid).alive) continue;
    ::kill(pid, SIGTERM);
    WaitOrKill(pid, absl::Seconds(10), /*group=*/true);
  }
  // Finalizers a failed run may have left (the domain, its DaemonSet and templates).
  auto drop_finalizers = [&](const k8s::ResourceInfo& r, const std::string& ns) {
    auto list = client_->List(r, ns);
    if (!list.ok()) return;
    for (const auto& item : (*list)["items"]) {
      (void)client_->MergePatch(r, ns, item["metadata"]["name"].get<std::string>(),
                                {{"metadata", {{"finalizers", nullptr}}}});
    }
  };
  drop_finalizers(k8s::ComputeDomain::kResource, cd_ns_);
  drop_finalizers(k8s::DaemonSet::kResource, driver_ns_);
  drop_finalizers(k8s::ResourceClaimTemplate::kResource, driver_ns_);
  drop_finalizers(k8s::ResourceClaimTemplate::kResource, cd_ns_);
  // No kubelet runs these pods, so a graceful delete would wait forever: force it.
  k8s::DeleteOptions now;
  now.grace_period_seconds = 0;
  ParallelFor(static_cast<int>(nodes_.size()), o_.start_workers, [&](int i) {
    if (!nodes_[i]->pod_name.empty()) {
      (void)client_->Delete(k8s::Pod::kResource, driver_ns_, nodes_[i]->pod_name, now);
    }
  });
  for (const std::string& ns : {driver_ns_, cd_ns_}) (void)client_->Delete(kNamespace, "", ns);
  if (!policy_name_.empty()) {
    (void)client_->Delete(kPolicyBinding, "", policy_name_);
    (void)client_->Delete(kPolicy, "", policy_name_);
  }
  if (nodes_created_) {
    ParallelFor(static_cast<int>(nodes_.size()), o_.start_workers, [&](int i) {
      (void)client_->Delete(k8s::Node::kResource, "", nodes_[i]->node_name);
    });
  }
  if (!keep_logs) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

}  // namespace dra::bench
