#include "lib/cdcontroller/clique_sync.h"

#include <algorithm>
#include <set>

namespace dra::cdcontroller {

using k8s::ComputeDomainDaemonInfo;

CliqueDaemons DesiredCliqueDaemons(const std::vector<ComputeDomainDaemonInfo>& existing,
                                   const std::vector<DaemonPod>& pods, const std::string& clique_id,
                                   const std::map<std::string, int64_t>& remembered,
                                   int max_nodes) {
  // Members by node name (sorted, so that new nodes are placed in a stable order).
  std::map<std::string, const DaemonPod*> members;
  for (const DaemonPod& p : pods) {
    if (clique_id.empty() || !p.has_clique_label || p.clique_id != clique_id || p.terminating ||
        p.node_name.empty() || p.pod_ip.empty()) {
      continue;
    }
    members.emplace(p.node_name, &p);
  }
  std::map<int64_t, const DaemonPod*> placed;  // index -> pod
  std::set<std::string> done;
  auto place = [&](const std::string& node, int64_t index) {
    if (done.contains(node) || index < 0 || index >= max_nodes || placed.contains(index)) {
      return false;
    }
    auto it = members.find(node);
    if (it == members.end()) return false;
    placed.emplace(index, it->second);
    done.insert(node);
    return true;
  };
  const std::vector<int64_t> resolved = k8s::ResolvedIndices(existing);
  for (size_t i = 0; i < existing.size(); ++i) place(existing[i].node_name, resolved[i]);
  for (const auto& [node, index] : remembered) place(node, index);
  CliqueDaemons out;
  int64_t next = 0;
  for (const auto& [node, pod] : members) {
    if (done.contains(node)) continue;
    while (next < max_nodes && placed.contains(next)) ++next;
    if (!place(node, next)) out.unplaced.push_back(node);
  }
  for (const auto& [index, pod] : placed) {
    ComputeDomainDaemonInfo d;
    d.node_name = pod->node_name;
    d.ip_address = pod->pod_ip;
    d.clique_id = clique_id;
    d.index = index;
    d.status = std::string(pod->ready ? k8s::kComputeDomainStatusReady
                                      : k8s::kComputeDomainStatusNotReady);
    out.daemons.push_back(std::move(d));
    out.pods.push_back(pod);
  }
  return out;
}

bool RemovesNodes(const std::vector<ComputeDomainDaemonInfo>& existing,
                  const std::vector<ComputeDomainDaemonInfo>& desired) {
  std::set<std::string> kept;
  for (const ComputeDomainDaemonInfo& d : desired) kept.insert(d.node_name);
  return std::any_of(existing.begin(), existing.end(),
                     [&](const ComputeDomainDaemonInfo& d) { return !kept.contains(d.node_name); });
}

k8s::ComputeDomainClique CliqueObject(k8s::ComputeDomainClique base, const std::string& ns,
                                      const std::string& cd_uid, const std::string& clique_id,
                                      const CliqueDaemons& desired) {
  base.metadata.name = k8s::CliqueObjectName(cd_uid, clique_id);
  base.metadata.namespace_name = ns;
  base.metadata.labels[std::string(k8s::kComputeDomainLabel)] = cd_uid;
  base.metadata.labels[std::string(k8s::kComputeDomainCliqueLabel)] = clique_id;
  base.daemons = desired.daemons;
  // The garbage collector removes the clique after the last of its daemon pods, also when the
  // controller is not running then.
  std::vector<k8s::OwnerReference> refs;
  for (const k8s::OwnerReference& r : base.metadata.owner_references) {
    if (!(r.api_version == "v1" && r.kind == "Pod")) refs.push_back(r);
  }
  for (const DaemonPod* p : desired.pods) {
    if (p->pod_name.empty() || p->pod_uid.empty()) continue;
    k8s::OwnerReference ref;
    ref.api_version = "v1";
    ref.kind = "Pod";
    ref.name = p->pod_name;
    ref.uid = p->pod_uid;
    refs.push_back(std::move(ref));
  }
  base.metadata.owner_references = std::move(refs);
  return base;
}

bool CliqueDiffers(const k8s::ComputeDomainClique& current, const k8s::ComputeDomainClique& next) {
  if (current.daemons != next.daemons || current.metadata.labels != next.metadata.labels) {
    return true;
  }
  const auto& a = current.metadata.owner_references;
  const auto& b = next.metadata.owner_references;
  if (a.size() != b.size()) return true;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].api_version != b[i].api_version || a[i].kind != b[i].kind || a[i].name != b[i].name ||
        a[i].uid != b[i].uid) {
      return true;
    }
  }
  return false;
}

}  // namespace dra::cdcontroller
