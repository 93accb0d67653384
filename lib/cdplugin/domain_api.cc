#include "lib/cdplugin/domain_api.h"

#include "absl/strings/str_cat.h"
#include "lib/cdplugin/errors.h"
#include "lib/common/json_access.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/objects_resource.h"

namespace dra::cdplugin {
namespace {

constexpr char kUidIndex[] = "uid";
const std::string kLabel(k8s::kComputeDomainLabel);

std::string NodeLabel(const nlohmann::json& node) {
  const nlohmann::json* labels = nullptr;
  if (node.contains("metadata") && node["metadata"].contains("labels")) {
    labels = &node["metadata"]["labels"];
  }
  if (labels == nullptr || !labels->is_object() || !labels->contains(kLabel) ||
      !(*labels)[kLabel].is_string()) {
    return "";
  }
  return (*labels)[kLabel].get<std::string>();
}

}  // namespace

KubeDomainApi::KubeDomainApi(k8s::Client* client, std::string node_name,
                             std::string driver_namespace, absl::Duration resync)
    : client_(client),
      node_name_(std::move(node_name)),
      driver_namespace_(std::move(driver_namespace)),
      informer_(client, "", {}, resync) {
  informer_.AddIndex(kUidIndex, [](const k8s::ComputeDomain& cd) {
    return std::vector<std::string>{cd.metadata.uid};
  });
}

KubeDomainApi::~KubeDomainApi() { Stop(); }

absl::Status KubeDomainApi::Start(absl::Duration timeout) {
  informer_.Start();
  if (!informer_.WaitForSync(timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the ComputeDomain informer did not sync within ", absl::FormatDuration(timeout),
        " (are the ComputeDomain CRDs installed, and may this service account list "
        "computedomains.resource.nvidia.com in all namespaces?)"));
  }
  return absl::OkStatus();
}

void KubeDomainApi::Stop() { informer_.Stop(); }

std::shared_ptr<const k8s::ComputeDomain> KubeDomainApi::FindDomain(const std::string& uid) const {
  auto found = informer_.ByIndex(kUidIndex, uid);
  return found.empty() ? nullptr : found.front();
}

absl::Status KubeDomainApi::AddNodeLabel(const std::string& cd_uid) {
  return k8s::RetryOnConflict([&]() -> absl::Status {
    ASSIGN_OR_RETURN(nlohmann::json node, client_->Get(k8s::Node::kResource, "", node_name_));
    const std::string current = NodeLabel(node);
    if (current == cd_uid) return absl::OkStatus();
    if (!current.empty()) {
      return RetryableError(
          absl::StrCat("node ", node_name_, ": label ", kLabel,
                       " already exists for a different ComputeDomain (", current,
                       "); waiting until that domain's channel claim on this node is unprepared"));
    }
    node["metadata"]["labels"][kLabel] = cd_uid;
    // An Update with the node's resourceVersion: a concurrent writer makes it Conflict (retried
    // above) instead of two domains both believing they own the node.
    return client_->Update(k8s::Node::kResource, "", node).status();
  });
}

absl::Status KubeDomainApi::RemoveNodeLabel(const std::string& cd_uid) {
  return k8s::RetryOnConflict([&]() -> absl::Status {
    absl::StatusOr<nlohmann::json> node = client_->Get(k8s::Node::kResource, "", node_name_);
    if (absl::IsNotFound(node.status())) return absl::OkStatus();
    RETURN_IF_ERROR(node.status());
    if (NodeLabel(*node) != cd_uid) return absl::OkStatus();
    (*node)["metadata"]["labels"].erase(kLabel);
    return client_->Update(k8s::Node::kResource, "", *node).status();
  });
}

absl::StatusOr<bool> KubeDomainApi::DaemonReady(const k8s::ComputeDomain& domain,
                                                const std::string& clique_id) {
  const std::string name = k8s::CliqueObjectName(domain.metadata.uid, clique_id);
  absl::StatusOr<nlohmann::json> j =
      client_->Get(k8s::ComputeDomainClique::kResource, driver_namespace_, name);
  if (j.ok()) {
    ASSIGN_OR_RETURN(k8s::ComputeDomainClique clique, k8s::ComputeDomainClique::FromJson(*j));
    for (const k8s::ComputeDomainDaemonInfo& d : clique.daemons) {
      if (d.node_name == node_name_) return d.status == k8s::kComputeDomainStatusReady;
    }
    return false;
  }
  if (!absl::IsNotFound(j.status())) {
    DRA_VLOG(2, "reading the clique failed; using the ComputeDomain status", "clique",
             absl::StrCat(driver_namespace_, "/", name), "err", j.status());
  }
  for (const k8s::ComputeDomainNode& n : domain.status.nodes) {
    if (n.name == node_name_) return n.status == k8s::kComputeDomainStatusReady;
  }
  return false;
}

absl::StatusOr<std::optional<std::string>> KubeDomainApi::ClaimUid(const std::string& ns,
                                                                   const std::string& name) {
  absl::StatusOr<nlohmann::json> j = client_->Get(k8s::ResourceClaim::kResource, ns, name);
  if (absl::IsNotFound(j.status())) return std::optional<std::string>();
  RETURN_IF_ERROR(j.status());
  return std::optional<std::string>(
      json_access::StringOr(json_access::MemberOrNull(*j, "metadata"), "uid"));
}

absl::Status KubeDomainApi::PatchNodeLabel(const std::string& key, const std::string& value) {
  nlohmann::json patch;
  patch["metadata"]["labels"][key] =
      value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
  return client_->MergePatch(k8s::Node::kResource, "", node_name_, patch).status();
}

}  // namespace dra::cdplugin
