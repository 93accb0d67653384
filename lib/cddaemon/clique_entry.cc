#include "lib/cddaemon/clique_entry.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace dra::cddaemon {
namespace {

bool EnsureOwnerRef(k8s::ObjectMeta& meta, const DaemonIdentity& me) {
  for (const k8s::OwnerReference& ref : meta.owner_references) {
    if (ref.uid == me.pod_uid) return false;
  }
  k8s::OwnerReference ref;
  ref.api_version = "v1";
  ref.kind = "Pod";
  ref.name = me.pod_name;
  ref.uid = me.pod_uid;
  meta.owner_references.push_back(std::move(ref));
  return true;
}

}  // namespace

absl::StatusOr<int64_t> NextFreeIndex(const k8s::ComputeDomainClique& clique, int max_nodes) {
  std::set<int64_t> used;
  for (const k8s::ComputeDomainDaemonInfo& d : clique.daemons) used.insert(d.index);
  int64_t next = 0;
  while (used.contains(next)) ++next;
  if (next >= max_nodes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no available indices within maxNodesPerIMEXDomain (", max_nodes, ")"));
  }
  return next;
}

absl::StatusOr<bool> UpsertOwnEntry(k8s::ComputeDomainClique& clique, const DaemonIdentity& me) {
  bool changed = false;
  k8s::ComputeDomainDaemonInfo* mine = nullptr;
  for (k8s::ComputeDomainDaemonInfo& d : clique.daemons) {
    if (d.node_name == me.node_name) mine = &d;
  }
  if (mine == nullptr) {
    absl::StatusOr<int64_t> index = NextFreeIndex(clique, me.max_nodes);
    if (!index.ok()) {
      return absl::Status(index.status().code(),
                          absl::StrCat("ComputeDomainClique ", clique.metadata.name, ": ",
                                       index.status().message()));
    }
    k8s::ComputeDomainDaemonInfo d;
    d.node_name = me.node_name;
    d.clique_id = me.clique_id;
    d.index = *index;
    d.status = std::string(k8s::kComputeDomainStatusNotReady);
    clique.daemons.push_back(std::move(d));
    mine = &clique.daemons.back();
    changed = true;
  }
  if (mine->ip_address != me.pod_ip) {
    mine->ip_address = me.pod_ip;
    changed = true;
  }
  if (mine->clique_id != me.clique_id) {
    mine->clique_id = me.clique_id;
    changed = true;
  }
  if (EnsureOwnerRef(clique.metadata, me)) changed = true;
  return changed;
}

absl::StatusOr<bool> SetOwnStatus(k8s::ComputeDomainClique& clique, absl::string_view node_name,
                                  absl::string_view status) {
  for (k8s::ComputeDomainDaemonInfo& d : clique.daemons) {
    if (d.node_name != node_name) continue;
    if (d.status == status) return false;
    d.status = std::string(status);
    return true;
  }
  return absl::NotFoundError(absl::StrCat("daemon info not yet listed in ComputeDomainClique ",
                                          clique.metadata.name, " (waiting for insertion)"));
}

bool RemoveOwnEntries(k8s::ComputeDomainClique& clique, absl::string_view pod_ip) {
  size_t before = clique.daemons.size();
  std::erase_if(clique.daemons,
                [&](const k8s::ComputeDomainDaemonInfo& d) { return d.ip_address == pod_ip; });
  return clique.daemons.size() != before;
}

k8s::ComputeDomainClique NewClique(absl::string_view namespace_name, absl::string_view cd_uid,
                                   const DaemonIdentity& me) {
  k8s::ComputeDomainClique c;
  c.metadata.name = k8s::CliqueObjectName(cd_uid, me.clique_id);
  c.metadata.namespace_name = std::string(namespace_name);
  c.metadata.labels[std::string(k8s::kComputeDomainLabel)] = std::string(cd_uid);
  c.metadata.labels[std::string(k8s::kComputeDomainCliqueLabel)] = me.clique_id;
  EnsureOwnerRef(c.metadata, me);
  return c;
}

namespace {

k8s::OwnerReference PodRef(const DaemonIdentity& me) {
  k8s::OwnerReference ref;
  ref.api_version = "v1";
  ref.kind = "Pod";
  ref.name = me.pod_name;
  ref.uid = me.pod_uid;
  return ref;
}

bool HasMember(const nlohmann::json& raw, absl::string_view a, absl::string_view b = "") {
  if (!raw.is_object()) return false;
  auto it = raw.find(std::string(a));
  if (it == raw.end()) return false;
  if (b.empty()) return it->is_array();
  if (!it->is_object()) return false;
  auto jt = it->find(std::string(b));
  return jt != it->end() && jt->is_array();
}

k8s::ComputeDomainDaemonInfo NewEntry(const DaemonIdentity& me, const OwnEntryWish& wish,
                                      int64_t index) {
  k8s::ComputeDomainDaemonInfo d;
  d.node_name = me.node_name;
  d.ip_address = me.pod_ip;
  d.clique_id = me.clique_id;
  d.index = index;
  d.status = wish.status.value_or(std::string(k8s::kComputeDomainStatusNotReady));
  return d;
}

absl::Status Exhausted(const k8s::ComputeDomainClique& clique, int max_nodes) {
  return absl::ResourceExhaustedError(
      absl::StrCat("ComputeDomainClique ", clique.metadata.name,
                   ": no available indices within maxNodesPerIMEXDomain (", max_nodes, ")"));
}

}  // namespace

absl::StatusOr<nlohmann::json> OwnEntryPatch(const k8s::ComputeDomainClique& clique,
                                             const DaemonIdentity& me, const OwnEntryWish& wish) {
  nlohmann::json ops = nlohmann::json::array();
  bool version_guard = false;
  int position = -1;
  for (size_t i = 0; i < clique.daemons.size(); ++i) {
    if (clique.daemons[i].node_name == me.node_name) position = static_cast<int>(i);
  }
  if (position < 0) {
    int64_t index = -1;
    if (wish.preferred_index >= 0 && wish.preferred_index < me.max_nodes) {
      index = wish.preferred_index;
      for (const k8s::ComputeDomainDaemonInfo& d : clique.daemons) {
        if (d.index == index) index = -1;
      }
    }
    if (index < 0) {
      absl::StatusOr<int64_t> next = NextFreeIndex(clique, me.max_nodes);
      if (!next.ok()) return Exhausted(clique, me.max_nodes);
      index = *next;
    }
    nlohmann::json entry = k8s::DaemonInfoToJson(NewEntry(me, wish, index));
    if (HasMember(clique.raw, "daemons")) {
      ops.push_back({{"op", "add"}, {"path", "/daemons/-"}, {"value", entry}});
    } else {
      version_guard = true;
      ops.push_back(
          {{"op", "add"}, {"path", "/daemons"}, {"value", nlohmann::json::array({entry})}});
    }
  } else {
    const k8s::ComputeDomainDaemonInfo& seen = clique.daemons[position];
    k8s::ComputeDomainDaemonInfo want = seen;
    want.ip_address = me.pod_ip;
    want.clique_id = me.clique_id;
    want.index = k8s::ResolvedIndices(clique.daemons)[position];
    if (want.index >= me.max_nodes) return Exhausted(clique, me.max_nodes);
    if (wish.status.has_value()) want.status = *wish.status;
    if (!(want == seen)) {
      const std::string path = absl::StrCat("/daemons/", position);
      ops.push_back({{"op", "test"}, {"path", path + "/nodeName"}, {"value", me.node_name}});
      ops.push_back({{"op", "replace"}, {"path", path}, {"value", k8s::DaemonInfoToJson(want)}});
    }
  }
  bool has_ref = false;
  for (const k8s::OwnerReference& ref : clique.metadata.owner_references) {
    if (ref.uid == me.pod_uid) has_ref = true;
  }
  if (!has_ref) {
    nlohmann::json ref = k8s::EncodeOwnerReference(PodRef(me));
    if (HasMember(clique.raw, "metadata", "ownerReferences")) {
      ops.push_back({{"op", "add"}, {"path", "/metadata/ownerReferences/-"}, {"value", ref}});
    } else {
      version_guard = true;
      ops.push_back({{"op", "add"},
                     {"path", "/metadata/ownerReferences"},
                     {"value", nlohmann::json::array({ref})}});
    }
  }
  if (version_guard) {
    nlohmann::json guard = {{"op", "test"},
                            {"path", "/metadata/resourceVersion"},
                            {"value", clique.metadata.resource_version}};
    ops.insert(ops.begin(), std::move(guard));
  }
  return ops;
}

nlohmann::json RemoveOwnEntriesPatch(const k8s::ComputeDomainClique& clique,
                                     absl::string_view pod_ip) {
  nlohmann::json ops = nlohmann::json::array();
  for (size_t i = clique.daemons.size(); i-- > 0;) {
    if (clique.daemons[i].ip_address != pod_ip) continue;
    const std::string path = absl::StrCat("/daemons/", i);
    ops.push_back({{"op", "test"}, {"path", path + "/ipAddress"}, {"value", std::string(pod_ip)}});
    ops.push_back({{"op", "remove"}, {"path", path}});
  }
  return ops;
}

nlohmann::json NewCliqueWithOwnEntry(absl::string_view namespace_name, absl::string_view cd_uid,
                                     const DaemonIdentity& me, const OwnEntryWish& wish) {
  k8s::ComputeDomainClique c = NewClique(namespace_name, cd_uid, me);
  int64_t index =
      wish.preferred_index >= 0 && wish.preferred_index < me.max_nodes ? wish.preferred_index : 0;
  c.daemons.push_back(NewEntry(me, wish, index));
  nlohmann::json out = c.ToJson();
  if (out.contains("metadata")) {
    // Only what this daemon owns: no resourceVersion, uid or timestamps of a seen object.
    nlohmann::json& m = out["metadata"];
    for (const char* key : {"resourceVersion", "uid", "creationTimestamp", "managedFields"}) {
      m.erase(key);
    }
  }
  return out;
}

}  // namespace dra::cddaemon
