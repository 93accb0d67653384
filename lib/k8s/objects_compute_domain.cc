#include "lib/k8s/objects_compute_domain.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"
#include "lib/k8s/json_decode.h"

namespace dra::k8s {
namespace {

absl::Status DecodeChannel(const nlohmann::json& j, const std::string& path,
                           ComputeDomainChannelSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  nlohmann::json rct;
  RETURN_IF_ERROR(r.Raw("resourceClaimTemplate", &rct));
  if (!rct.is_null()) {
    ASSIGN_OR_RETURN(ObjectReader t, ObjectReader::Create(rct, path + ".resourceClaimTemplate"));
    RETURN_IF_ERROR(t.String("name", &out->resource_claim_template_name));
  }
  RETURN_IF_ERROR(r.String("allocationMode", &out->allocation_mode));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeSpec(const nlohmann::json& j, const std::string& path, ComputeDomainSpec* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.Int64("numNodes", &out->num_nodes));
  RETURN_IF_ERROR(r.Field("channel", &out->channel, DecodeChannel));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeNode(const nlohmann::json& j, const std::string& path, ComputeDomainNode* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("name", &out->name));
  RETURN_IF_ERROR(r.String("ipAddress", &out->ip_address));
  RETURN_IF_ERROR(r.String("cliqueID", &out->clique_id));
  RETURN_IF_ERROR(r.Int64("index", &out->index));
  RETURN_IF_ERROR(r.String("status", &out->status));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeStatus(const nlohmann::json& j, const std::string& path,
                          ComputeDomainStatus* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("status", &out->status));
  RETURN_IF_ERROR(r.List("nodes", &out->nodes, DecodeNode));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

absl::Status DecodeDaemon(const nlohmann::json& j, const std::string& path,
                          ComputeDomainDaemonInfo* out) {
  ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::Create(j, path));
  RETURN_IF_ERROR(r.String("nodeName", &out->node_name));
  RETURN_IF_ERROR(r.String("ipAddress", &out->ip_address));
  RETURN_IF_ERROR(r.String("cliqueID", &out->clique_id));
  RETURN_IF_ERROR(r.Int64("index", &out->index));
  RETURN_IF_ERROR(r.String("status", &out->status));
  out->unknown_fields = r.UnknownFields();
  return absl::OkStatus();
}

// name, ipAddress and cliqueID are required by the schema, hence always written (cliqueID may be
// "" on a non-fabric node); index has no omitempty.
nlohmann::json EncodeNode(const ComputeDomainNode& n) {
  nlohmann::json out = StartObject(n.unknown_fields);
  out["name"] = n.name;
  out["ipAddress"] = n.ip_address;
  out["cliqueID"] = n.clique_id;
  out["index"] = n.index;
  PutString(out, "status", n.status);
  return out;
}

nlohmann::json EncodeDaemon(const ComputeDomainDaemonInfo& d) {
  nlohmann::json out = StartObject(d.unknown_fields);
  out["nodeName"] = d.node_name;
  out["ipAddress"] = d.ip_address;
  out["cliqueID"] = d.clique_id;
  out["index"] = d.index;
  PutString(out, "status", d.status);
  return out;
}

}  // namespace

absl::StatusOr<ComputeDomain> ComputeDomain::FromJson(const nlohmann::json& j) {
  ComputeDomain cd;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &cd.metadata, [&](ObjectReader& r) {
    RETURN_IF_ERROR(r.Field("spec", &cd.spec, DecodeSpec));
    return r.Field("status", &cd.status, DecodeStatus);
  }));
  cd.raw = j;
  return cd;
}

nlohmann::json ComputeDomain::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  nlohmann::json channel = StartObject(spec.channel.unknown_fields);
  nlohmann::json rct =
      channel.contains("resourceClaimTemplate") && channel["resourceClaimTemplate"].is_object()
          ? channel["resourceClaimTemplate"]
          : nlohmann::json::object();
  rct["name"] = spec.channel.resource_claim_template_name;
  channel["resourceClaimTemplate"] = std::move(rct);
  PutString(channel, "allocationMode", spec.channel.allocation_mode);
  nlohmann::json spec_json = StartObject(spec.unknown_fields);
  if (spec.num_nodes != 0)
    spec_json["numNodes"] = spec.num_nodes;
  else
    spec_json.erase("numNodes");
  spec_json["channel"] = std::move(channel);
  out["spec"] = std::move(spec_json);
  nlohmann::json status_json = StartObject(status.unknown_fields);
  PutString(status_json, "status", status.status);
  PutList(status_json, "nodes", status.nodes, EncodeNode);
  PutObject(out, "status", std::move(status_json));
  return out;
}

absl::StatusOr<ComputeDomainClique> ComputeDomainClique::FromJson(const nlohmann::json& j) {
  ComputeDomainClique clique;
  RETURN_IF_ERROR(DecodeTopLevel(j, kResource, &clique.metadata, [&](ObjectReader& r) {
    return r.List("daemons", &clique.daemons, DecodeDaemon);
  }));
  clique.raw = j;
  return clique;
}

nlohmann::json ComputeDomainClique::ToJson() const {
  nlohmann::json out = EncodeTopLevel(raw, kResource, metadata);
  PutList(out, "daemons", daemons, EncodeDaemon);
  return out;
}

std::string CliqueObjectName(absl::string_view compute_domain_uid, absl::string_view clique_id) {
  return absl::StrCat(compute_domain_uid, ".", clique_id);
}

std::vector<int64_t> ResolvedIndices(const std::vector<ComputeDomainDaemonInfo>& daemons) {
  std::set<int64_t> taken;
  std::vector<int64_t> out;
  out.reserve(daemons.size());
  for (const ComputeDomainDaemonInfo& d : daemons) {
    int64_t index = d.index;
    if (index < 0 || taken.contains(index)) {
      index = 0;
      while (taken.contains(index)) ++index;
    }
    taken.insert(index);
    out.push_back(index);
  }
  return out;
}

std::vector<ComputeDomainDaemonInfo> SettledDaemons(
    const std::vector<ComputeDomainDaemonInfo>& daemons) {
  std::vector<int64_t> resolved = ResolvedIndices(daemons);
  std::vector<ComputeDomainDaemonInfo> out;
  for (size_t i = 0; i < daemons.size(); ++i) {
    if (daemons[i].index == resolved[i]) out.push_back(daemons[i]);
  }
  return out;
}

}  // namespace dra::k8s
