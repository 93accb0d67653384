// Controller: starting and stopping the informers, the work queue and the timers, and the
// event handlers that feed the queue.

#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/cdcontroller/binding.h"
#include "lib/cdcontroller/controller.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/common/log.h"

namespace dra::cdcontroller {
namespace {

using internal::DomainLabel;
using internal::DomainLabelIndex;
using internal::kIndexByDomain;
using internal::kIndexByUid;
using k8s::ComputeDomain;
using k8s::ComputeDomainClique;
using k8s::ResourceClaimTemplate;

k8s::ListOptions LabelExists() { return {.label_selector = std::string(k8s::kComputeDomainLabel)}; }

k8s::ListOptions LabelExistsWithTarget(absl::string_view target) {
  return {.label_selector = absl::StrCat(k8s::kComputeDomainLabel, ",",
                                         k8s::kComputeDomainTargetLabel, "=", target)};
}

}  // namespace

absl::Status Controller::Start(absl::Duration sync_timeout) {
  // The public controller's first line once it runs (docs/compatibility.md "Log lines").
  DRA_INFO("Starting ComputeDomain Controller", "namespace", config_.driver_namespace);
  const absl::Duration resync = config_.informer_resync;
  domains_ = std::make_unique<k8s::Informer<ComputeDomain>>(client_, config_.watch_namespace,
                                                            k8s::ListOptions{}, resync);
  domains_->AddIndex(kIndexByUid,
                     [](const ComputeDomain& cd) { return std::vector{cd.metadata.uid}; });
  auto on_domain = [this](const std::shared_ptr<const ComputeDomain>& cd) {
    EnqueueDomain(cd->metadata.uid);
    if (config_.stale_node_label_cleanup) {
      queue_.Enqueue("node-labels", [this] { return CleanupStaleNodeLabels(); });
    }
  };
  domains_->AddHandlers({.on_add = on_domain,
                         .on_update = [on_domain](const auto&, const auto& cd) { on_domain(cd); },
                         .on_delete = [this](const auto& cd) { OnDomainDeleted(*cd); }});

  // A removed object of a live domain is created again.
  auto requeue_owner = [this](const auto& obj) {
    std::string uid = DomainLabel(obj->metadata);
    if (!uid.empty()) EnqueueDomain(uid);
  };
  if (!config_.host_managed()) {
    for (const std::string& ns : DaemonSetNamespaces()) {
      auto ds = std::make_unique<k8s::Informer<k8s::DaemonSet>>(client_, ns, LabelExists(), resync);
      ds->AddIndex(kIndexByDomain, DomainLabelIndex<k8s::DaemonSet>);
      ds->AddHandlers({.on_delete = requeue_owner});
      daemonsets_.push_back(std::move(ds));
    }
    daemon_rcts_ = std::make_unique<k8s::Informer<ResourceClaimTemplate>>(
        client_, config_.driver_namespace, LabelExistsWithTarget(k8s::kComputeDomainTargetDaemon),
        resync);
    daemon_rcts_->AddIndex(kIndexByDomain, DomainLabelIndex<ResourceClaimTemplate>);
    daemon_rcts_->AddHandlers({.on_delete = requeue_owner});

    cliques_ = std::make_unique<k8s::Informer<ComputeDomainClique>>(
        client_, config_.driver_namespace, k8s::ListOptions{}, resync);
    cliques_->AddIndex(kIndexByDomain, DomainLabelIndex<ComputeDomainClique>);
    // The controller is the cliques' only writer (clique_sync.h): every clique or daemon pod
    // event queues the domain, whose reconcile brings each clique in line with the pods.
    cliques_->AddHandlers(
        {.on_add = requeue_owner,
         .on_update = [requeue_owner](const auto&, const auto& c) { requeue_owner(c); },
         .on_delete =
             [this, requeue_owner](const auto& c) {
               ForgetClique(k8s::Informer<ComputeDomainClique>::KeyOf(*c));
               requeue_owner(c);
             }});

    pods_ = std::make_unique<k8s::Informer<k8s::Pod>>(client_, config_.driver_namespace,
                                                      LabelExists(), resync);
    pods_->AddIndex(kIndexByDomain, DomainLabelIndex<k8s::Pod>);
    pods_->AddHandlers(
        {.on_add = requeue_owner,
         .on_update = [requeue_owner](const auto&, const auto& pod) { requeue_owner(pod); },
         .on_delete = requeue_owner});
    nodes_ = std::make_unique<k8s::Informer<k8s::Node>>(client_, "", LabelExists(), resync);
    if (config_.binding_conditions) {
      // Every claim of the cluster: a list of claims cannot be narrowed to one driver's on the
      // server. Only claims allocated with binding conditions of this driver are indexed.
      claims_ = std::make_unique<k8s::Informer<k8s::ResourceClaim>>(
          client_, config_.watch_namespace, k8s::ListOptions{}, resync);
      claims_->AddIndex(kIndexByDomain, [](const k8s::ResourceClaim& c) {
        std::optional<BindingClaim> b = BindingClaimOf(c);
        if (!b || b->domain_uid.empty()) return std::vector<std::string>{};
        return std::vector<std::string>{b->domain_uid};
      });
      claims_->AddHandlers(
          {.on_add = [this](const auto& c) { OnClaimEvent(nullptr, c.get()); },
           .on_update = [this](const auto& before,
                               const auto& after) { OnClaimEvent(before.get(), after.get()); },
           .on_delete = [this](const auto& c) { OnClaimEvent(c.get(), nullptr); }});
      // A node label that goes (a domain's channel unprepared there) may free a node a waiting
      // claim was allocated on.
      nodes_->AddHandlers(
          {.on_update = [this](const auto&, const auto&) { EnqueueWaitingBindingDomains(); },
           .on_delete = [this](const auto&) { EnqueueWaitingBindingDomains(); }});
    }
  }
  workload_rcts_ = std::make_unique<k8s::Informer<ResourceClaimTemplate>>(
      client_, config_.watch_namespace, LabelExistsWithTarget(k8s::kComputeDomainTargetWorkload),
      resync);
  workload_rcts_->AddIndex(kIndexByDomain, DomainLabelIndex<ResourceClaimTemplate>);
  workload_rcts_->AddHandlers({.on_delete = requeue_owner});

  // Caches first, so that the first reconciles see the objects that exist.
  std::vector<std::function<bool()>> synced;
  auto start = [&](auto& informer) {
    if (!informer) return;
    informer->Start();
    synced.push_back([&informer, sync_timeout] { return informer->WaitForSync(sync_timeout); });
  };
  for (auto& ds : daemonsets_) start(ds);
  start(daemon_rcts_);
  start(workload_rcts_);
  start(cliques_);
  start(pods_);
  start(nodes_);
  start(claims_);
  start(domains_);
  for (auto& wait : synced) {
    if (!wait()) {
      return absl::UnavailableError(
          absl::StrCat("informer caches did not sync within ", absl::FormatDuration(sync_timeout)));
    }
  }
  DRA_INFO("informer caches synced", "computeDomains", domains_->List().size());
  queue_.Start();
  queue_.Enqueue("gc", [this] { return CollectGarbage(); });
  if (config_.stale_node_label_cleanup) {
    queue_.Enqueue("node-labels", [this] { return CleanupStaleNodeLabels(); });
  }
  timer_ = std::thread([this] { TimerLoop(); });
  return absl::OkStatus();
}

void Controller::Stop() {
  bool first_stop = false;
  {
    absl::MutexLock lock(&mu_);
    first_stop = !stopping_;
    stopping_ = true;
  }
  if (timer_.joinable()) timer_.join();
  queue_.Stop();
  // Each informer notices a stop within about a second (its watch polls for it); stopping them
  // side by side keeps a leader hand-over short.
  std::vector<std::thread> stoppers;
  auto stop = [&stoppers](auto& informer) {
    if (informer) stoppers.emplace_back([&informer] { informer->Stop(); });
  };
  stop(domains_);
  for (auto& ds : daemonsets_) stop(ds);
  stop(daemon_rcts_);
  stop(workload_rcts_);
  stop(cliques_);
  stop(pods_);
  stop(nodes_);
  stop(claims_);
  for (std::thread& t : stoppers) t.join();
  // The public controller's last line (docs/compatibility.md "Log lines"); once, after a Start.
  if (first_stop && domains_) DRA_INFO("ComputeDomain Controller is shutdown");
}

void Controller::TimerLoop() {
  absl::Time next_status = absl::Now() + config_.status_resync;
  absl::Time next_cleanup = absl::Now() + config_.cleanup_interval;
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithDeadline(absl::Condition(&stopping_), std::min(next_status, next_cleanup))) {
    mu_.Unlock();
    const absl::Time now = absl::Now();
    if (now >= next_status) {
      for (const auto& cd : domains_->List()) EnqueueDomain(cd->metadata.uid);
      next_status = now + config_.status_resync;
    }
    if (now >= next_cleanup) {
      queue_.Enqueue("gc", [this] { return CollectGarbage(); });
      if (config_.stale_node_label_cleanup) {
        queue_.Enqueue("node-labels", [this] { return CleanupStaleNodeLabels(); });
      }
      next_cleanup = now + config_.cleanup_interval;
    }
    mu_.Lock();
  }
}

}  // namespace dra::cdcontroller
