#include "lib/gpuplugin/status/device_status.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_resource.h"

namespace dra::gpu {
namespace {

constexpr size_t kMaxFieldManagerLength = 128;  // the API server refuses longer ones

nlohmann::json ClaimMetadata(const StatusClaimRef& claim) {
  nlohmann::json meta = {{"name", claim.name}, {"namespace", claim.namespace_name}};
  // A precondition: a claim deleted and created again under the name is not written.
  if (!claim.uid.empty()) meta["uid"] = claim.uid;
  return meta;
}

class ClientDeviceStatusWriter final : public DeviceStatusWriter {
 public:
  ClientDeviceStatusWriter(k8s::Client* client, std::string driver,
                           metrics::Family<metrics::Counter>* writes)
      : client_(client), driver_(std::move(driver)), writes_(writes) {}

  absl::Status Write(const StatusClaimRef& claim,
                     const std::vector<DeviceStatusEntry>& entries) const override {
    return Count("write", Apply(claim, entries));
  }

  absl::Status Remove(const StatusClaimRef& claim) const override {
    // One GET saves the apply (and an entry in managedFields) for the usual claim without any
    // entry of ours, and tells a gone or recreated claim apart.
    absl::StatusOr<nlohmann::json> current =
        client_->Get(k8s::ResourceClaim::kResource, claim.namespace_name, claim.name);
    if (absl::IsNotFound(current.status())) return absl::OkStatus();
    if (!current.ok()) return Count("remove", current.status());
    absl::StatusOr<k8s::ResourceClaim> parsed = k8s::ResourceClaim::FromJson(*current);
    if (!parsed.ok()) return Count("remove", parsed.status());
    if (!claim.uid.empty() && parsed->metadata.uid != claim.uid) return absl::OkStatus();
    bool ours = false;
    for (const k8s::AllocatedDeviceStatus& d : parsed->status.devices) ours |= d.driver == driver_;
    if (!ours) return absl::OkStatus();
    absl::Status s = Apply(claim, {});
    if (absl::IsNotFound(s)) return absl::OkStatus();  // deleted since the GET
    return Count("remove", s);
  }

 private:
  absl::Status Apply(const StatusClaimRef& claim,
                     const std::vector<DeviceStatusEntry>& entries) const {
    return client_
        ->Apply(k8s::ResourceClaim::kResource, claim.namespace_name,
                DeviceStatusApplyBody(driver_, claim, entries, absl::Now()), /*force=*/true,
                "status")
        .status();
  }

  absl::Status Count(const char* operation, absl::Status s) const {
    if (writes_ != nullptr) writes_->WithLabels({operation, s.ok() ? "success" : "error"})->Inc();
    return s;
  }

  k8s::Client* const client_;
  const std::string driver_;
  metrics::Family<metrics::Counter>* const writes_;
};

}  // namespace

nlohmann::json DeviceStatusData(const AllocatableDevice& device) {
  nlohmann::json data = {{"productName", device.gpu.product_name}};
  if (device.mig) {
    data["uuid"] = device.mig->uuid;
    data["parentUUID"] = device.mig->parent_uuid;
    data["profile"] = device.mig->profile;
  } else {
    data["uuid"] = device.gpu.uuid;
  }
  return data;
}

std::string DeviceStatusFieldManager(const std::string& driver, const std::string& node) {
  return absl::StrCat(driver, "/", node).substr(0, kMaxFieldManagerLength);
}

nlohmann::json DeviceStatusApplyBody(const std::string& driver, const StatusClaimRef& claim,
                                     const std::vector<DeviceStatusEntry>& entries,
                                     absl::Time now) {
  const std::string time = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceStatusEntry& e : entries) {
    nlohmann::json ready = {{"type", "Ready"},
                            {"status", "True"},
                            {"reason", "DevicePrepared"},
                            {"message", "prepared by the kubelet plugin on node " + e.pool},
                            {"lastTransitionTime", time}};
    if (claim.generation > 0) ready["observedGeneration"] = claim.generation;
    nlohmann::json d = {{"driver", driver},
                        {"pool", e.pool},
                        {"device", e.device},
                        {"conditions", nlohmann::json::array({ready})},
                        {"data", e.data}};
    if (e.share_id) d["shareID"] = *e.share_id;
    devices.push_back(std::move(d));
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", ClaimMetadata(claim)},
          {"status", {{"devices", std::move(devices)}}}};
}

nlohmann::json StatusClaimRefToJson(const StatusClaimRef& claim) {
  return {{"namespace", claim.namespace_name}, {"name", claim.name}, {"uid", claim.uid}};
}

absl::StatusOr<StatusClaimRef> StatusClaimRefFromJson(const nlohmann::json& j) {
  StatusClaimRef out;
  for (auto [key, target] : {std::pair{"namespace", &out.namespace_name},
                             std::pair{"name", &out.name}, std::pair{"uid", &out.uid}}) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("deviceStatus undo: field \"", key, "\" must be a string; got ", j.dump()));
    }
    *target = j[key].get<std::string>();
  }
  if (out.name.empty()) return absl::InvalidArgumentError("deviceStatus undo: empty claim name");
  return out;
}

nlohmann::json DeviceStatusRecordToJson(const StatusClaimRef& claim,
                                        const std::vector<DeviceStatusEntry>& entries) {
  nlohmann::json j = StatusClaimRefToJson(claim);
  if (claim.generation > 0) j["generation"] = claim.generation;
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceStatusEntry& e : entries) {
    nlohmann::json d = {{"pool", e.pool}, {"device", e.device}, {"data", e.data}};
    if (e.share_id) d["shareID"] = *e.share_id;
    devices.push_back(std::move(d));
  }
  j["devices"] = std::move(devices);
  return j;
}

absl::StatusOr<DeviceStatusRecord> DeviceStatusRecordFromJson(const nlohmann::json& j) {
  DeviceStatusRecord out;
  ASSIGN_OR_RETURN(out.claim, StatusClaimRefFromJson(j));
  if (j.contains("generation")) {
    if (!j["generation"].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "deviceStatus undo: field \"generation\" must be an integer; got ", j.dump()));
    }
    out.claim.generation = j["generation"].get<int64_t>();
  }
  if (!j.contains("devices")) return out;
  const nlohmann::json& devices = j["devices"];
  if (!devices.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("deviceStatus undo: field \"devices\" must be a list; got ", j.dump()));
  }
  std::vector<DeviceStatusEntry> entries;
  for (size_t i = 0; i < devices.size(); ++i) {
    const nlohmann::json& d = devices[i];
    const bool ok = d.is_object() && d.contains("pool") && d["pool"].is_string() &&
                    d.contains("device") && d["device"].is_string() && d.contains("data") &&
                    d["data"].is_object() && (!d.contains("shareID") || d["shareID"].is_string());
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("deviceStatus undo: devices[", i,
                       "] must be an object with string \"pool\" and \"device\", object "
                       "\"data\" and optional string \"shareID\"; got ",
                       d.dump()));
    }
    DeviceStatusEntry e{.pool = d["pool"].get<std::string>(),
                        .device = d["device"].get<std::string>(),
                        .data = d["data"]};
    if (d.contains("shareID")) e.share_id = d["shareID"].get<std::string>();
    entries.push_back(std::move(e));
  }
  out.entries = std::move(entries);
  return out;
}

std::unique_ptr<DeviceStatusWriter> DeviceStatusWriterFromClient(
    k8s::Client* client, std::string driver, metrics::Family<metrics::Counter>* writes) {
  return std::make_unique<ClientDeviceStatusWriter>(client, std::move(driver), writes);
}

metrics::Family<metrics::Counter>* AddDeviceStatusWritesMetric(metrics::Registry* registry) {
  return registry->AddCounter(
      "nvidia_dra_device_status_writes_total",
      "Writes of ResourceClaim status.devices entries (operation write|remove) by result.",
      {"operation", "result"});
}

}  // namespace dra::gpu
