// SimDomain: the steps the fault tests drive (sim_domain.h, "Steps for the fault tests").

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/computedomain/sim_domain.h"
#include "lib/k8s/objects_coordination.h"
#include "lib/k8s/objects_core.h"

namespace dra::bench {

absl::Status SimDomain::Begin() {
  absl::Status s = Setup();
  if (s.ok()) s = CreateDomain();
  if (s.ok()) {
    StartProbes();
    for (auto& n : nodes_) {
      s = StartNode(*n);
      if (!s.ok()) break;
    }
  }
  if (s.ok()) return s;
  keep_dir_ = true;  // the logs say why
  return absl::Status(s.code(), absl::StrCat(s.message(), " (logs kept under ", dir_, ")"));
}

absl::Status SimDomain::WaitDomain(const std::string& what,
                                   const std::function<bool(const k8s::ComputeDomain&)>& pred,
                                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "never read";
  while (absl::Now() < deadline) {
    auto got = client_->Get(k8s::ComputeDomain::kResource, cd_ns_, cd_name_);
    if (got.ok()) {
      auto cd = k8s::ComputeDomain::FromJson(*got);
      if (cd.ok()) {
        if (pred(*cd)) return absl::OkStatus();
        last = got->value("status", nlohmann::json::object()).dump();
      }
    } else {
      last = std::string(got.status().message());
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("ComputeDomain ", cd_ns_, "/", cd_name_, ": ",
                                                  what, " not within ",
                                                  absl::FormatDuration(timeout), "; last ", last));
}

absl::Status SimDomain::WaitReady(int nodes, absl::Duration timeout) {
  return WaitDomain(
      absl::StrCat("Ready with ", nodes, " nodes"),
      [nodes](const k8s::ComputeDomain& cd) {
        return cd.status.status == k8s::kComputeDomainStatusReady &&
               static_cast<int>(cd.status.nodes.size()) == nodes;
      },
      timeout);
}

absl::Status SimDomain::KillDaemon(int i) {
  Node& n = *nodes_[i];
  KillGroup(n.pid);
  n.pid = -1;
  n.started = false;
  n.probe_passed = false;
  nlohmann::json not_ready = {{"status",
                               {{"conditions",
                                 {{{"type", "PodScheduled"}, {"status", "True"}},
                                  {{"type", "ContainersReady"}, {"status", "False"}},
                                  {{"type", "Ready"}, {"status", "False"}}}}}}};
  auto patched =
      client_->MergePatch(k8s::Pod::kResource, driver_ns_, n.pod_name, not_ready, "status");
  return patched.ok() ? absl::OkStatus() : patched.status();
}

absl::Status SimDomain::RestartDaemon(int i) {
  Node& n = *nodes_[i];
  n.pid = Spawn(DaemonArgs(n, "run"), {"FAKE_IMEX_HOSTS_FILE=" + n.dir + "/hosts"},
                n.dir + "/daemon.log", /*own_group=*/true);
  if (n.pid < 0) return absl::InternalError("cannot start " + o_.daemon_binary);
  n.next_probe = absl::InfinitePast();
  n.started = true;
  return absl::OkStatus();
}

absl::Status SimDomain::RemoveNode(int i) {
  Node& n = *nodes_[i];
  KillGroup(n.pid);
  n.pid = -1;
  n.started = false;
  k8s::DeleteOptions now;
  now.grace_period_seconds = 0;
  absl::Status s = client_->Delete(k8s::Pod::kResource, driver_ns_, n.pod_name, now);
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  s = client_->Delete(k8s::Node::kResource, "", n.node_name);
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  return absl::OkStatus();
}

absl::StatusOr<pid_t> SimDomain::LeaderController() {
  if (controller_pids_.size() == 1) return controller_pids_[0];
  auto lease = client_->Get(k8s::Lease::kResource, driver_ns_, "cdc-leader");
  if (!lease.ok()) return lease.status();
  const std::string holder = (*lease)["spec"].value("holderIdentity", "");
  for (const auto& [pid, id] : controller_ids_) {
    // The identity is <pod-name>-<random UUID>.
    if (holder.rfind(id + "-", 0) == 0 && ReadProcStats(pid).alive) return pid;
  }
  return absl::NotFoundError(
      absl::StrCat("no live controller holds the lease (holder \"", holder, "\")"));
}

void SimDomain::KillController(pid_t pid) { KillGroup(pid); }

absl::StatusOr<std::vector<k8s::ComputeDomainClique>> SimDomain::Cliques() {
  auto list =
      client_->List(k8s::ComputeDomainClique::kResource, driver_ns_,
                    {.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", cd_uid_)});
  if (!list.ok()) return list.status();
  std::vector<k8s::ComputeDomainClique> out;
  for (const nlohmann::json& item : (*list)["items"]) {
    auto c = k8s::ComputeDomainClique::FromJson(item);
    if (!c.ok()) return c.status();
    out.push_back(std::move(*c));
  }
  return out;
}

}  // namespace dra::bench
