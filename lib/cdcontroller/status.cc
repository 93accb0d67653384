#include "lib/cdcontroller/status.h"

#include <algorithm>
#include <map>

#include "lib/common/json_access.h"

namespace dra::cdcontroller {

using k8s::ComputeDomainNode;

DaemonPod DaemonPodFromPod(const k8s::Pod& pod) {
  DaemonPod d;
  const auto& labels = pod.metadata.labels;
  if (auto it = labels.find(std::string(k8s::kComputeDomainLabel)); it != labels.end()) {
    d.cd_uid = it->second;
  }
  auto clique = labels.find(std::string(k8s::kComputeDomainCliqueLabel));
  d.has_clique_label = clique != labels.end();
  if (d.has_clique_label) d.clique_id = clique->second;
  d.node_name = pod.spec.node_name;
  d.pod_name = pod.metadata.name;
  d.pod_uid = pod.metadata.uid;
  d.ready = false;
  d.terminating = pod.metadata.deletion_timestamp.has_value();
  const nlohmann::json& status = json_access::MemberOrNull(pod.raw, "status");
  if (status.is_object()) {
    if (auto ip = status.find("podIP"); ip != status.end() && ip->is_string()) {
      d.pod_ip = ip->get<std::string>();
    }
    if (auto conds = status.find("conditions"); conds != status.end() && conds->is_array()) {
      for (const nlohmann::json& c : *conds) {
        if (json_access::StringOr(c, "type") == "Ready") {
          d.ready = json_access::StringOr(c, "status") == "True";
        }
      }
    }
  }
  return d;
}

namespace {

void AddNonFabricNodes(const std::vector<DaemonPod>& pods,
                       std::map<std::string, ComputeDomainNode>* out) {
  for (const DaemonPod& p : pods) {
    if (!p.non_fabric() || p.node_name.empty() || p.pod_ip.empty()) continue;
    ComputeDomainNode n;
    n.name = p.node_name;
    n.ip_address = p.pod_ip;
    n.clique_id = "";
    n.index = -1;
    n.status =
        std::string(p.ready ? k8s::kComputeDomainStatusReady : k8s::kComputeDomainStatusNotReady);
    out->emplace(n.name, std::move(n));
  }
}

std::vector<ComputeDomainNode> Values(std::map<std::string, ComputeDomainNode>&& m) {
  std::vector<ComputeDomainNode> out;
  out.reserve(m.size());
  for (auto& [name, node] : m) out.push_back(std::move(node));
  return out;
}

}  // namespace

std::vector<ComputeDomainNode> BuildNodes(std::vector<const k8s::ComputeDomainClique*> cliques,
                                          const std::vector<DaemonPod>& pods) {
  std::sort(cliques.begin(), cliques.end(),
            [](const auto* a, const auto* b) { return a->metadata.name < b->metadata.name; });
  // A node whose daemon pod is known and not Ready (its container died or restarts) is NotReady
  // whatever its entry says: a dead daemon cannot write that itself.
  std::set<std::string> down;
  for (const DaemonPod& p : pods) {
    if (!p.non_fabric() && !p.node_name.empty() && !p.ready) down.insert(p.node_name);
  }
  std::map<std::string, ComputeDomainNode> nodes;
  for (const k8s::ComputeDomainClique* c : cliques) {
    // An entry still moving off an index an earlier entry holds is not listed yet.
    for (const k8s::ComputeDomainDaemonInfo& d : k8s::SettledDaemons(c->daemons)) {
      ComputeDomainNode n;
      n.name = d.node_name;
      n.ip_address = d.ip_address;
      n.clique_id = d.clique_id;
      n.index = d.index;
      n.status =
          down.contains(d.node_name) ? std::string(k8s::kComputeDomainStatusNotReady) : d.status;
      nodes.emplace(n.name, std::move(n));
    }
  }
  AddNonFabricNodes(pods, &nodes);
  return Values(std::move(nodes));
}

std::string GlobalStatus(int64_t num_nodes, const std::vector<ComputeDomainNode>& nodes,
                         bool host_managed) {
  if (host_managed) return std::string(k8s::kComputeDomainStatusReady);
  if (static_cast<int64_t>(nodes.size()) < num_nodes) {
    return std::string(k8s::kComputeDomainStatusNotReady);
  }
  for (const ComputeDomainNode& n : nodes) {
    if (n.status == k8s::kComputeDomainStatusNotReady) {
      return std::string(k8s::kComputeDomainStatusNotReady);
    }
  }
  return std::string(k8s::kComputeDomainStatusReady);
}

bool SameNodes(const std::vector<ComputeDomainNode>& a, const std::vector<ComputeDomainNode>& b) {
  if (a.size() != b.size()) return false;
  std::map<std::string, const ComputeDomainNode*> by_name;
  for (const ComputeDomainNode& n : a) by_name[n.name] = &n;
  if (by_name.size() != a.size()) return false;
  for (const ComputeDomainNode& n : b) {
    auto it = by_name.find(n.name);
    if (it == by_name.end() || !(*it->second == n)) return false;
  }
  return true;
}

}  // namespace dra::cdcontroller
