// Controller: device binding conditions of the channel claims (binding.h; docs/compute-domains.md
// "Binding conditions"). The scheduler holds a pod whose channel device carries binding conditions
// in PreBind; until the pod is bound no kubelet prepares its claim, so the controller does what the
// plugin's prepare does on the path without them (label the node, wait for its daemon) and reports
// the outcome on the claim.

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/cdcontroller/binding.h"
#include "lib/cdcontroller/controller.h"
#include "lib/cdcontroller/controller_internal.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"

namespace dra::cdcontroller {
namespace {

using internal::kIndexByDomain;

std::string ClaimRef(const k8s::ResourceClaim& claim) {
  return absl::StrCat(claim.metadata.namespace_name, "/", claim.metadata.name);
}

std::string NodeLabelOf(const nlohmann::json& node) {
  const nlohmann::json& labels =
      json_access::MemberOrNull(json_access::MemberOrNull(node, "metadata"), "labels");
  return json_access::StringOr(labels, std::string(k8s::kComputeDomainLabel));
}

}  // namespace

void Controller::OnClaimEvent(const k8s::ResourceClaim* before, const k8s::ResourceClaim* after) {
  std::set<std::string> uids;
  for (const k8s::ResourceClaim* c : {before, after}) {
    if (c == nullptr) continue;
    if (std::optional<BindingClaim> b = BindingClaimOf(*c); b && !b->domain_uid.empty()) {
      uids.insert(b->domain_uid);
    }
  }
  if (after != nullptr && HasChannelWithoutBindingConditions(*after) &&
      !logged_without_binding_conditions_.exchange(true)) {
    // Once per process: the cluster serves the old path (the plugin's prepare waits for the
    // daemon), which works as before.
    DRA_INFO(
        "a ComputeDomain channel was allocated without device binding conditions: the scheduler "
        "or the API server runs without DRADeviceBindingConditions / "
        "DRAResourceClaimDeviceStatus, or the kubelet plugin publishes none; its pod is bound at "
        "once and waits in the plugin's prepare for the IMEX daemon",
        "claim", ClaimRef(*after));
  }
  for (const std::string& uid : uids) EnqueueDomain(uid);
}

void Controller::EnqueueWaitingBindingDomains() {
  if (!claims_) return;
  std::set<std::string> uids;
  for (const auto& c : claims_->List()) {
    std::optional<BindingClaim> b = BindingClaimOf(*c);
    if (!b || b->domain_uid.empty()) continue;
    for (const BindingDevice& d : b->devices) {
      if (d.state == BindingDevice::State::kPending) uids.insert(b->domain_uid);
    }
  }
  for (const std::string& uid : uids) EnqueueDomain(uid);
}

absl::StatusOr<bool> Controller::LabelNodeFor(const std::string& node, const std::string& uid) {
  // The informer of the labelled nodes: a node that has the label already needs no request (every
  // reconcile of a forming domain passes here for each of its waiting claims).
  if (std::shared_ptr<const k8s::Node> cached = nodes_ ? nodes_->Get(node) : nullptr) {
    auto it = cached->metadata.labels.find(std::string(k8s::kComputeDomainLabel));
    if (it != cached->metadata.labels.end() && it->second == uid) return true;
  }
  bool labelled = false;
  absl::Status s = k8s::RetryOnConflict([&]() -> absl::Status {
    ASSIGN_OR_RETURN(nlohmann::json n, client_->Get(k8s::Node::kResource, "", node));
    const std::string current = NodeLabelOf(n);
    labelled = current == uid;
    if (!current.empty()) return absl::OkStatus();
    n["metadata"]["labels"][std::string(k8s::kComputeDomainLabel)] = uid;
    // An Update with the node's resourceVersion: a label set meanwhile (the plugin of the node,
    // for another domain) makes it a Conflict, read again above, instead of being overwritten.
    RETURN_IF_ERROR(client_->Update(k8s::Node::kResource, "", n).status());
    DRA_INFO("labelled node for a claim waiting for its IMEX daemon", "node", node, "computeDomain",
             uid);
    labelled = true;
    return absl::OkStatus();
  });
  if (!s.ok()) {
    return Annotate(
        s, absl::StrCat("set label ", k8s::kComputeDomainLabel, "=", uid, " on node ", node));
  }
  return labelled;
}

absl::Status Controller::UnlabelNodeFor(const std::string& node, const std::string& uid) {
  absl::Status s = k8s::RetryOnConflict([&]() -> absl::Status {
    absl::StatusOr<nlohmann::json> n = client_->Get(k8s::Node::kResource, "", node);
    if (absl::IsNotFound(n.status())) return absl::OkStatus();
    RETURN_IF_ERROR(n.status());
    if (NodeLabelOf(*n) != uid) return absl::OkStatus();
    (*n)["metadata"]["labels"].erase(std::string(k8s::kComputeDomainLabel));
    RETURN_IF_ERROR(client_->Update(k8s::Node::kResource, "", *n).status());
    DRA_INFO(
        "removed node label: no claim with binding conditions of the domain is allocated there",
        "node", node, "computeDomain", uid);
    return absl::OkStatus();
  });
  if (!s.ok()) {
    return Annotate(
        s, absl::StrCat("remove label ", k8s::kComputeDomainLabel, "=", uid, " from node ", node));
  }
  return absl::OkStatus();
}

absl::Status Controller::SyncBindingConditions(const std::string& uid, const k8s::ComputeDomain* cd,
                                               const std::vector<k8s::ComputeDomainNode>& nodes) {
  if (!claims_) return absl::OkStatus();
  std::set<std::string> ready_nodes;
  for (const k8s::ComputeDomainNode& n : nodes) {
    if (n.status == k8s::kComputeDomainStatusReady) ready_nodes.insert(n.name);
  }
  std::optional<bool> gone;  // cd == nullptr: whether a live list confirms the domain is gone
  absl::Status first_error;
  std::set<std::string> wanted;  // nodes where a claim of this domain waits or was reported Ready
  for (const auto& claim : claims_->ByIndex(kIndexByDomain, uid)) {
    std::optional<BindingClaim> b = BindingClaimOf(*claim);
    if (!b || b->domain_uid != uid) continue;
    std::vector<BindingReport> reports;
    bool changed = false;
    for (const BindingDevice& d : b->devices) {
      if (d.state != BindingDevice::State::kPending) {
        if (d.state == BindingDevice::State::kReady) wanted.insert(d.node);
        reports.push_back(
            {.pool = d.pool, .device = d.device, .keep_conditions = d.reported_conditions});
        continue;
      }
      std::string reason, message;
      if (cd == nullptr) {
        if (!gone.has_value()) {
          absl::StatusOr<std::set<std::string>> live = LiveDomainUids();
          if (!live.ok()) return Annotate(live.status(), "list ComputeDomains");
          gone = !live->contains(uid);
        }
        if (!*gone) {
          // The cache has not seen it yet: the domain's add event queues this again.
          wanted.insert(d.node);
          continue;
        }
        reason = "ComputeDomainNotFound";
        message = absl::StrCat("no ComputeDomain has the UID ", uid,
                               " (domainID of the claim's ComputeDomainChannelConfig)");
      } else if (cd->metadata.deletion_timestamp.has_value()) {
        reason = "ComputeDomainDeleted";
        message = absl::StrCat("ComputeDomain ", cd->metadata.namespace_name, "/",
                               cd->metadata.name, " is being deleted");
      } else if (cd->metadata.namespace_name != claim->metadata.namespace_name) {
        reason = "ComputeDomainInOtherNamespace";
        message =
            absl::StrCat("ComputeDomain ", cd->metadata.namespace_name, "/", cd->metadata.name,
                         " is not in the claim's namespace ", claim->metadata.namespace_name);
      }
      if (!reason.empty()) {
        DRA_INFO("claim cannot bind: its IMEX daemon cannot become Ready", "claim",
                 ClaimRef(*claim), "device", d.device, "reason", reason, "message", message);
        reports.push_back({.pool = d.pool,
                           .device = d.device,
                           .ready = false,
                           .reason = reason,
                           .message = message});
        changed = true;
        continue;
      }
      wanted.insert(d.node);
      absl::StatusOr<bool> labelled = LabelNodeFor(d.node, uid);
      if (!labelled.ok()) {
        if (first_error.ok()) first_error = labelled.status();
        continue;
      }
      if (!*labelled) {
        // Another domain holds the node until its channel claim there is unprepared; the label's
        // removal (node informer) queues this again.
        DRA_VLOG(1, "claim waits: its node is labelled for another ComputeDomain", "claim",
                 ClaimRef(*claim), "node", d.node, "computeDomain", uid);
        continue;
      }
      {
        absl::MutexLock lock(&mu_);
        binding_labelled_[uid].insert(d.node);
      }
      if (!ready_nodes.contains(d.node)) continue;
      reports.push_back(
          {.pool = d.pool,
           .device = d.device,
           .ready = true,
           .reason = std::string(k8s::kChannelBindingCondition),
           .message = absl::StrCat("the IMEX daemon of ComputeDomain ", cd->metadata.namespace_name,
                                   "/", cd->metadata.name, " on node ", d.node, " is Ready")});
      changed = true;
    }
    if (!changed) continue;
    absl::StatusOr<nlohmann::json> applied =
        client_->Apply(k8s::ResourceClaim::kResource, claim->metadata.namespace_name,
                       BindingStatusApplyBody(*claim, reports, absl::Now()), /*force=*/true,
                       "status", kBindingFieldManager);
    if (!applied.ok()) {
      // A claim deleted meanwhile (or made again under its name: the uid precondition) is done.
      if (absl::IsNotFound(applied.status()) || absl::IsAlreadyExists(applied.status())) continue;
      if (first_error.ok()) {
        first_error =
            Annotate(applied.status(), absl::StrCat("write status.devices of ResourceClaim ",
                                                    ClaimRef(*claim), " (binding conditions)"));
      }
      continue;
    }
    for (const BindingReport& r : reports) {
      if (!r.keep_conditions.is_null()) continue;
      DRA_INFO("reported binding condition", "claim", ClaimRef(*claim), "device", r.device,
               "condition",
               r.ready ? k8s::kChannelBindingCondition : k8s::kChannelBindingFailureCondition,
               "reason", r.reason);
    }
  }
  // Labels set for claims that are gone or deallocated (a pod deleted while it waited, a failed
  // binding) go; a node whose claim was bound keeps it until the plugin's unprepare removes it.
  std::set<std::string> stale;
  {
    absl::MutexLock lock(&mu_);
    auto it = binding_labelled_.find(uid);
    if (it != binding_labelled_.end()) {
      for (const std::string& node : it->second) {
        if (!wanted.contains(node)) stale.insert(node);
      }
    }
  }
  for (const std::string& node : stale) {
    absl::Status s = UnlabelNodeFor(node, uid);
    if (!s.ok()) {
      if (first_error.ok()) first_error = s;
      continue;
    }
    absl::MutexLock lock(&mu_);
    binding_labelled_[uid].erase(node);
  }
  return first_error;
}

}  // namespace dra::cdcontroller
