#include "lib/cdplugin/prepared_claim.h"

#include "absl/strings/str_cat.h"
#include "lib/api/types.h"

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
  RecordedDevice r{.request = d.result.request,
                   .pool = d.result.pool.empty() ? pool : d.result.pool,
                   .device = d.result.device,
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
    nlohmann::json dj = {{"request", d.request},
                         {"pool", d.pool},
                         {"device", d.device},
                         {"type", DeviceTypeName(d.type)},
                         {"id", d.id},
                         {"domainID", d.domain_id},
                         {"cdiDeviceIDs", d.cdi_device_ids}};
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
  try {
    const std::string phase = j.value("phase", "");
    if (phase == "PrepareAborted") {
      r.phase = Phase::kAborted;
      std::string err;
      if (!absl::ParseTime(absl::RFC3339_full, j.value("abortedAt", ""), &r.aborted_at, &err)) {
        r.aborted_at = absl::InfinitePast();  // expires at the next cleanup
      }
    } else if (phase == "PrepareCompleted") {
      r.phase = Phase::kCompleted;
    } else if (phase == "PrepareStarted") {
      r.phase = Phase::kStarted;
    } else if (!phase.empty()) {
      return bad(absl::StrCat("phase: unknown value \"", phase, "\""));
    }
    for (const nlohmann::json& dj : j.value("devices", nlohmann::json::array())) {
      RecordedDevice d;
      d.request = dj.value("request", "");
      d.pool = dj.value("pool", "");
      d.device = dj.value("device", "");
      const std::string type = dj.value("type", "");
      if (type == "channel") {
        d.type = DeviceType::kChannel;
      } else if (type == "daemon") {
        d.type = DeviceType::kDaemon;
      } else {
        return bad(absl::StrCat("devices[].type: unknown value \"", type, "\""));
      }
      d.id = dj.value("id", 0);
      d.domain_id = dj.value("domainID", "");
      d.allocation_mode = dj.value("allocationMode", "");
      d.cdi_device_ids = dj.value("cdiDeviceIDs", std::vector<std::string>{});
      r.devices.push_back(std::move(d));
    }
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
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
