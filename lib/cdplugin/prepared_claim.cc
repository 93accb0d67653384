#include "lib/cdplugin/prepared_claim.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/api/types.h"
#include "lib/common/json_access.h"

namespace dra::cdplugin {

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kStarted:
      return "PrepareStarted";
    case Phase::kCompleted:
      return "PrepareCompleted";
    case Phase::kAborted:
      return "PrepareAborted";
  }
  return "?";
}

RecordedDevice RecordDevice(const ConfiguredDevice& d, const std::string& pool) {
  RecordedDevice r{.kubelet = {.request_names = {d.result.request},
                               .pool_name = d.result.pool.empty() ? pool : d.result.pool,
                               .device_name = d.result.device},
                   .type = d.type,
                   .id = d.id,
                   .domain_id = d.domain_id()};
  if (auto* ch = std::get_if<api::ComputeDomainChannelConfig>(&d.config)) {
    r.allocation_mode = ch->allocation_mode;
  }
  return r;
}

nlohmann::json EncodeRecord(const ClaimRecord& record) {
  nlohmann::json j = {{"phase", PhaseName(record.phase)}, {"devices", nlohmann::json::array()}};
  if (record.phase == Phase::kAborted)
    j["abortedAt"] = absl::FormatTime(absl::RFC3339_full, record.aborted_at, absl::UTCTimeZone());
  for (const RecordedDevice& d : record.devices) {
    const std::vector<std::string>& requests = d.kubelet.request_names;
    nlohmann::json dj = {{"request", requests.empty() ? std::string() : requests.front()},
                         {"pool", d.kubelet.pool_name},
                         {"device", d.kubelet.device_name},
                         {"type", DeviceTypeName(d.type)},
                         {"id", d.id},
                         {"domainID", d.domain_id},
                         {"cdiDeviceIDs", d.kubelet.cdi_device_ids}};
    if (!d.allocation_mode.empty()) dj["allocationMode"] = d.allocation_mode;
    j["devices"].push_back(std::move(dj));
  }
  return j;
}

absl::StatusOr<ClaimRecord> DecodeRecord(const checkpoint::PreparedClaim& claim) {
  ClaimRecord r;
  r.phase = claim.state == checkpoint::ClaimState::kPrepareCompleted ? Phase::kCompleted
                                                                     : Phase::kStarted;
  const nlohmann::json& j = claim.prepared_devices;
  if (j.is_null()) return r;
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat("checkpoint entry of claim ", claim.uid, ": preparedDevices.", what));
  };
  if (!j.is_object()) return bad("want an object");
  // Checked reads (lib/common/json_access.h): a member of the wrong type is an error naming it.
  auto str = [&](const nlohmann::json& obj, const std::string& path,
                 const char* key) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::optional<std::string>> v = json_access::GetOptionalString(obj, path, key);
    if (!v.ok()) return bad(v.status().message());
    return v->value_or("");
  };
  ASSIGN_OR_RETURN(const std::string phase, str(j, "", "phase"));
  if (phase == "PrepareAborted") {
    r.phase = Phase::kAborted;
    ASSIGN_OR_RETURN(const std::string aborted_at, str(j, "", "abortedAt"));
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, aborted_at, &r.aborted_at, &err)) {
      r.aborted_at = absl::InfinitePast();  // expires at the next cleanup
    }
  } else if (phase == "PrepareCompleted") {
    r.phase = Phase::kCompleted;
  } else if (phase == "PrepareStarted") {
    r.phase = Phase::kStarted;
  } else if (!phase.empty()) {
    return bad(absl::StrCat("phase: unknown value \"", phase, "\""));
  }
  absl::StatusOr<const nlohmann::json*> devices = json_access::GetOptionalArray(j, "", "devices");
  if (!devices.ok()) return bad(devices.status().message());
  if (*devices == nullptr) return r;
  for (size_t i = 0; i < (*devices)->size(); ++i) {
    const nlohmann::json& dj = (**devices)[i];
    const std::string path = json_access::IndexPath("devices", i);
    if (absl::Status s = json_access::ExpectObject(dj, path); !s.ok()) return bad(s.message());
    RecordedDevice d;
    ASSIGN_OR_RETURN(std::string request, str(dj, path, "request"));
    d.kubelet.request_names = {std::move(request)};
    ASSIGN_OR_RETURN(d.kubelet.pool_name, str(dj, path, "pool"));
    ASSIGN_OR_RETURN(d.kubelet.device_name, str(dj, path, "device"));
    ASSIGN_OR_RETURN(const std::string type, str(dj, path, "type"));
    if (type == "channel") {
      d.type = DeviceType::kChannel;
    } else if (type == "daemon") {
      d.type = DeviceType::kDaemon;
    } else {
      return bad(absl::StrCat("devices[].type: unknown value \"", type, "\""));
    }
    if (const nlohmann::json* id = json_access::Find(dj, "id"); id != nullptr) {
      const std::string id_path = json_access::MemberPath(path, "id");
      if (absl::Status s = json_access::DecodeInt32(*id, id_path, &d.id); !s.ok()) {
        return bad(s.message());
      }
    }
    ASSIGN_OR_RETURN(d.domain_id, str(dj, path, "domainID"));
    ASSIGN_OR_RETURN(d.allocation_mode, str(dj, path, "allocationMode"));
    absl::StatusOr<const nlohmann::json*> ids =
        json_access::GetOptionalArray(dj, path, "cdiDeviceIDs");
    if (!ids.ok()) return bad(ids.status().message());
    if (*ids != nullptr) {
      const std::string ids_path = json_access::MemberPath(path, "cdiDeviceIDs");
      for (size_t k = 0; k < (*ids)->size(); ++k) {
        std::string id;
        absl::Status s =
            json_access::DecodeString((**ids)[k], json_access::IndexPath(ids_path, k), &id);
        if (!s.ok()) return bad(s.message());
        d.kubelet.cdi_device_ids.push_back(std::move(id));
      }
    }
    r.devices.push_back(std::move(d));
  }
  return r;
}

checkpoint::PreparedClaim ToCheckpoint(const ClaimRecord& record, const std::string& uid,
                                       const std::string& ns, const std::string& name,
                                       const nlohmann::json& allocation) {
  return {.uid = uid,
          .namespace_name = ns,
          .name = name,
          .state = record.phase == Phase::kCompleted ? checkpoint::ClaimState::kPrepareCompleted
                                                     : checkpoint::ClaimState::kPrepareStarted,
          .allocation = allocation,
          .prepared_devices = EncodeRecord(record)};
}

}  // namespace dra::cdplugin
