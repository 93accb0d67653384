#pragma once

// One benchmark run: a ComputeDomain formed by N simulated nodes against the real local API
// server, with the real compute-domain-controller and, per node, the real
// `compute-domain-daemon run` with the fake nvidia-imex on a loopback address of its own.
//
// The bench plays the parts no process plays here: it creates the Node objects (unschedulable,
// tainted, never labelled for the domain, so the DaemonSet controller starts nothing on them) and
// each node's daemon pod object (labelled like a DaemonSet pod, bound to its node, status written
// through the status subresource as a kubelet would: Running, pod IP, Ready False), and it runs
// the readiness probe (`compute-domain-daemon check`) itself, setting the pod's Ready condition
// when it passes. Everything it makes is removed again by Cleanup(), also after a failure or a
// shutdown signal.

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/computedomain/apiserver_metrics.h"
#include "bench/computedomain/sim_process.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_compute_domain.h"

namespace dra::bench {

struct SimOptions {
  int nodes = 4;
  int clique_size = 18;  // nodes per NVLink clique (and MAX_NODES_PER_IMEX_DOMAIN)
  double controller_qps = 1000;
  int controller_burst = 1000;
  absl::Duration probe_period = absl::Seconds(1);  // the startup probe's period
  // Nice value of the probe processes. On a cluster each node's kubelet runs its own probe on the
  // node's CPUs; here all N share the control plane's cores, so by default they run at the lowest
  // priority, behind the daemons (with autogroup scheduling a nice value ranks tasks only within
  // the bench's own session; docs/compute-domains.md "At scale").
  int probe_nice = 19;
  int probe_workers = 8;
  int start_workers = 8;  // threads creating pods and starting daemons
  absl::Duration timeout = absl::Seconds(180);
  std::string kubeconfig;
  std::string controller_binary;
  std::string daemon_binary;
  std::string imex_binary;
  std::string imex_ctl_binary;
  std::string work_dir;           // parent of this run's temp dir
  std::function<bool()> stopped;  // a shutdown signal arrived
  int64_t num_nodes = -1;         // the domain's spec.numNodes; < 0: `nodes`
  int controllers = 1;            // > 1: that many, with leader election (a short lease)
  // One ResourceClaim per node in the domain's namespace, allocated as the scheduler allocates a
  // workload's channel with device binding conditions (docs/compute-domains.md "Binding
  // conditions"); the run then also waits until the controller reported every one Ready.
  bool binding_claims = false;
};

// Seconds after the ComputeDomain was created; < 0: did not happen.
struct Phases {
  double pods_started = -1;   // last daemon process started (its pod exists, status Running)
  double registered = -1;     // last node listed in a clique
  double probes_passed = -1;  // last `check` passed (bench set the pod Ready)
  double entries_ready = -1;  // last clique entry Ready
  double domain_ready = -1;   // status.status Ready with all N nodes listed
  double claims_bound = -1;   // last claim with IMEXDaemonReady True (binding_claims)
  std::vector<double> per_node_claim_bound;
  std::vector<double> per_node_registered, per_node_probe, per_node_entry_ready;
};

struct SimResult {
  int nodes = 0;
  bool ready = false;
  std::string failure;
  Phases phases;
  RequestCounts requests;        // everything the API server served in the window
  RequestCounts bench_requests;  // what the bench itself sent in the window (subtracted)
  ProcStats controller;
  std::vector<ProcStats> daemons;
  std::vector<ProcStats> imex;
  int probes_run = 0;
  int probes_failed = 0;
  double probe_cpu_seconds = 0;  // the check processes (reaped children of the bench)
  double apiserver_cpu_seconds = 0;
  double etcd_cpu_seconds = 0;
  double machine_busy_fraction = 0;  // of all cores, over the window
  double load_1m = 0;
  int cores = 0;
};

class SimDomain {
 public:
  explicit SimDomain(SimOptions options);
  ~SimDomain();  // Cleanup()
  SimDomain(const SimDomain&) = delete;
  SimDomain& operator=(const SimDomain&) = delete;

  // Sets up, forms the domain, measures. Never throws; failures land in SimResult::failure.
  SimResult Run();
  // Removes processes, API objects and files made by this run. Idempotent.
  void Cleanup();

  // --- Steps for the fault tests (cd_faults_integration_test.cc; sim_faults.cc) ---
  // Sets up, creates the domain and starts every node and the readiness probes; does not wait.
  absl::Status Begin();
  // Polls the domain every 100 ms until `pred` holds, or DeadlineExceeded naming `what` and the
  // last status seen.
  absl::Status WaitDomain(const std::string& what,
                          const std::function<bool(const k8s::ComputeDomain&)>& pred,
                          absl::Duration timeout);
  // status.status Ready with exactly `nodes` nodes listed.
  absl::Status WaitReady(int nodes, absl::Duration timeout);
  // SIGKILL of node i's daemon and its nvidia-imex; its pod reports Ready False (what the kubelet
  // reports for a dead container).
  absl::Status KillDaemon(int i);
  // The container restarted in the same pod: the daemon runs again and the probe resumes.
  absl::Status RestartDaemon(int i);
  // The node is gone for good: daemon killed, pod force-deleted, Node deleted.
  absl::Status RemoveNode(int i);
  pid_t daemon_pid(int i) const { return nodes_[i]->pid; }
  // The controller process holding the leader lease (the only one without leader election).
  absl::StatusOr<pid_t> LeaderController();
  // SIGKILL of one controller process.
  void KillController(pid_t pid);
  absl::StatusOr<std::vector<k8s::ComputeDomainClique>> Cliques();
  k8s::Client& client() { return *client_; }
  const std::string& driver_namespace() const { return driver_ns_; }
  const std::string& domain_namespace() const { return cd_ns_; }
  const std::string& domain_uid() const { return cd_uid_; }
  const std::string& controller_log() const { return controller_log_; }

 private:
  struct Node {
    int i = 0;
    std::string node_name, pod_name, pod_uid, ip, clique_id, dir;
    pid_t pid = -1;
    std::atomic<bool> started{false};
    std::atomic<bool> probe_passed{false};
    absl::Time next_probe = absl::InfinitePast();
  };

  absl::Status Setup();
  absl::Status FenceOtherControllers();
  absl::Status StartController();
  absl::Status StartControllers();
  absl::Status CreateDomain();
  void StartProbes();
  absl::Status StartNode(Node& n);
  std::vector<std::string> DaemonArgs(const Node& n, const std::string& command) const;
  void ProbeLoop(int worker);
  void WatchDomain();
  void WatchCliques();
  // binding_claims: creates node i's claim with its allocation; watches them for the condition.
  absl::Status CreateBindingClaim(int i);
  void WatchClaims();
  void Count(const std::string& key);
  double Since(absl::Time t) const { return absl::ToDoubleSeconds(t - t0_); }

  const SimOptions o_;
  std::string run_id_;
  std::string pod_owner_uid_;  // the ConfigMap that controls the daemon pods
  std::string driver_ns_, cd_ns_, cd_name_ = "bench-domain", cd_uid_, cluster_uuid_;
  std::string dir_;
  std::string policy_name_;
  std::unique_ptr<k8s::Client> client_;
  std::vector<std::unique_ptr<Node>> nodes_;
  pid_t controller_pid_ = -1;
  std::string controller_log_;
  std::vector<pid_t> controller_pids_;           // all of them (controller_pid_ is the first)
  std::map<pid_t, std::string> controller_ids_;  // pid -> --pod-name
  absl::Time t0_;
  std::atomic<bool> done_{false};
  std::atomic<bool> cleaned_{false};
  std::atomic<bool> nodes_created_{false};
  bool keep_dir_ = false;  // a failed run keeps its logs

  std::mutex mu_;  // guards the members below
  std::map<std::string, double> bench_counts_;
  std::map<std::string, double> registered_at_, entry_ready_at_;  // node -> seconds
  std::map<std::string, double> claim_bound_at_;                  // claim name -> seconds
  std::vector<double> probe_at_;
  double domain_ready_at_ = -1;
  int probes_run_ = 0, probes_failed_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace dra::bench
