#include "lib/gpuplugin/record/prepared.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

absl::StatusOr<DeviceType> ParseType(const std::string& s) {
  if (s == "gpu") return DeviceType::kGpu;
  if (s == "mig") return DeviceType::kMig;
  if (s == "vfio") return DeviceType::kVfio;
  return absl::InvalidArgumentError(absl::StrCat("unknown prepared device type \"", s, "\""));
}

// The unsigned 32-bit member `key` of `j`: an integer in range. (nlohmann's get<unsigned int>()
// converts any number, and a float out of range is undefined behaviour: found by the checkpoint
// records fuzz target, seed prepared_minor_float.json.) Throws at() and value()'s exceptions.
absl::StatusOr<unsigned int> UintAt(const nlohmann::json& j, const char* key,
                                    const std::string& path) {
  const nlohmann::json& v = j.at(key);
  const bool in_range =
      v.is_number_unsigned()
          ? v.get<uint64_t>() <= std::numeric_limits<unsigned int>::max()
          : v.is_number_integer() && v.get<int64_t>() >= 0 &&
                v.get<int64_t>() <= int64_t{std::numeric_limits<unsigned int>::max()};
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prepared devices: ", path, key, ": expected an unsigned 32-bit integer, got ", v.dump()));
  }
  return v.get<unsigned int>();
}

}  // namespace

std::string ClaimDeviceName(const std::string& claim_uid, const std::string& device) {
  return absl::StrCat(claim_uid, "-", device);
}

nlohmann::json PreparedDevicesToJson(const std::vector<RecordedDevice>& devices) {
  nlohmann::json out = nlohmann::json::array();
  for (const RecordedDevice& d : devices) {
    nlohmann::json j = {{"requests", d.kubelet.request_names},
                        {"pool", d.kubelet.pool_name},
                        {"device", d.kubelet.device_name},
                        {"cdiDeviceIDs", d.kubelet.cdi_device_ids},
                        {"type", DeviceTypeName(d.type)},
                        {"uuid", d.uuid},
                        {"minor", d.minor},
                        {"pciBusID", d.pci_bus_id}};
    if (d.admin_access) j["adminAccess"] = true;
    if (d.time_slice_applied) j["timeSliceApplied"] = *d.time_slice_applied;
    if (d.mps_daemon) j["mpsDaemon"] = MpsDaemonRecordToJson(*d.mps_daemon);
    if (d.mig) {
      j["mig"] = {{"uuid", d.mig->uuid},
                  {"parentUUID", d.mig->parent_uuid},
                  {"parentMinor", d.mig->parent_minor},
                  {"parentPCIBusID", d.mig->parent_pci_bus_id},
                  {"profile", d.mig->profile},
                  {"giProfileID", d.mig->gi_profile_id},
                  {"placementStart", d.mig->placement_start},
                  {"placementSize", d.mig->placement_size},
                  {"giID", d.mig->gi_id},
                  {"ciID", d.mig->ci_id}};
      if (d.mig->dynamic) j["mig"]["dynamic"] = true;  // DynamicMIG: created at prepare
    }
    out.push_back(std::move(j));
  }
  return out;
}

absl::StatusOr<std::vector<RecordedDevice>> PreparedDevicesFromJson(const nlohmann::json& j) {
  std::vector<RecordedDevice> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return absl::InvalidArgumentError("prepared devices: expected a list");
  try {
    for (const nlohmann::json& e : j) {
      RecordedDevice d;
      d.kubelet.request_names = e.at("requests").get<std::vector<std::string>>();
      d.kubelet.pool_name = e.at("pool").get<std::string>();
      d.kubelet.device_name = e.at("device").get<std::string>();
      d.kubelet.cdi_device_ids = e.at("cdiDeviceIDs").get<std::vector<std::string>>();
      auto type = ParseType(e.at("type").get<std::string>());
      if (!type.ok()) return type.status();
      d.type = *type;
      d.uuid = e.at("uuid").get<std::string>();
      ASSIGN_OR_RETURN(d.minor, UintAt(e, "minor", ""));
      d.pci_bus_id = e.value("pciBusID", "");
      d.admin_access = e.value("adminAccess", false);
      if (e.contains("timeSliceApplied")) d.time_slice_applied = e["timeSliceApplied"].get<bool>();
      if (e.contains("mpsDaemon")) {
        auto mps = MpsDaemonRecordFromJson(e["mpsDaemon"]);
        if (!mps.ok()) return mps.status();
        d.mps_daemon = *std::move(mps);
      }
      if (e.contains("mig")) {
        const nlohmann::json& m = e["mig"];
        MigInfo mig{.uuid = m.at("uuid"),
                    .parent_uuid = m.at("parentUUID"),
                    .parent_pci_bus_id = m.at("parentPCIBusID"),
                    .profile = m.at("profile"),
                    .dynamic = m.value("dynamic", false)};
        ASSIGN_OR_RETURN(mig.parent_minor, UintAt(m, "parentMinor", "mig."));
        ASSIGN_OR_RETURN(mig.gi_profile_id, UintAt(m, "giProfileID", "mig."));
        ASSIGN_OR_RETURN(mig.placement_start, UintAt(m, "placementStart", "mig."));
        ASSIGN_OR_RETURN(mig.placement_size, UintAt(m, "placementSize", "mig."));
        ASSIGN_OR_RETURN(mig.gi_id, UintAt(m, "giID", "mig."));
        ASSIGN_OR_RETURN(mig.ci_id, UintAt(m, "ciID", "mig."));
        d.mig = std::move(mig);
      }
      out.push_back(std::move(d));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("prepared devices: ", e.what()));
  }
  return out;
}

}  // namespace dra::gpu
