#include "lib/gpuplugin/record/go_prepared.h"

#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/kubeletplugin/plugin_types.h"

namespace dra::gpu {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// What a canonical device name says: "gpu-<minor>" or
// "gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>".
struct NameParts {
  std::optional<unsigned> minor;
  std::string profile;  // dots removed, as in the name
  std::optional<unsigned> gi_profile_id, placement_start;
};

NameParts ParseName(const std::string& name) {
  NameParts out;
  std::vector<std::string> parts = absl::StrSplit(name, '-');
  unsigned n = 0;
  if (parts.size() >= 2 && parts[0] == "gpu" && absl::SimpleAtoi(parts[1], &n)) out.minor = n;
  if (parts.size() >= 6 && parts[2] == "mig") {
    unsigned gi = 0, start = 0;
    if (absl::SimpleAtoi(parts[parts.size() - 2], &gi) &&
        absl::SimpleAtoi(parts[parts.size() - 1], &start)) {
      out.gi_profile_id = gi;
      out.placement_start = start;
      out.profile = absl::StrJoin(parts.begin() + 3, parts.end() - 2, "-");
    }
  }
  return out;
}

absl::StatusOr<std::string> StringAt(const Json& obj, const char* key, const std::string& path,
                                     bool required = true) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return Bad(path, absl::StrCat("missing \"", key, "\""));
    return std::string();
  }
  if (!it->is_string()) return Bad(path, absl::StrCat("\"", key, "\": expected string"));
  return it->get<std::string>();
}

absl::StatusOr<unsigned> UintAt(const Json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer() || it->get<int64_t>() < 0) {
    return Bad(path, absl::StrCat("\"", key, "\": expected a non-negative integer"));
  }
  return it->get<unsigned>();
}

absl::StatusOr<std::vector<std::string>> StringsAt(const Json& obj, const char* key,
                                                   const std::string& path) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) return Bad(path, absl::StrCat("\"", key, "\": expected a list"));
  for (const Json& s : *it) {
    if (!s.is_string()) return Bad(path, absl::StrCat("\"", key, "\": expected strings"));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// Reads the Go "device" value D (the Go driver's kubeletplugin.Device) into `d`.
absl::Status FromGoDev(const Json& dev, const std::string& path, kubeletplugin::PreparedDevice* d) {
  if (!dev.is_object()) return Bad(path, "expected object");
  ASSIGN_OR_RETURN(d->request_names, StringsAt(dev, "Requests", path));
  ASSIGN_OR_RETURN(d->pool_name, StringAt(dev, "PoolName", path));
  ASSIGN_OR_RETURN(d->device_name, StringAt(dev, "DeviceName", path));
  ASSIGN_OR_RETURN(d->cdi_device_ids, StringsAt(dev, "CDIDeviceIDs", path));
  return absl::OkStatus();
}

// Whether the allocation gave this device to this request with admin access.
bool AdminAccessOf(const Json& allocation, const kubeletplugin::PreparedDevice& d) {
  if (!allocation.is_object()) return false;
  const Json results = allocation.value("devices", Json::object()).value("results", Json::array());
  if (!results.is_array()) return false;
  for (const Json& r : results) {
    if (!r.is_object() || r.value("device", "") != d.device_name ||
        r.value("pool", "") != d.pool_name) {
      continue;
    }
    if (!d.request_names.empty() && r.value("request", "") != d.request_names[0]) continue;
    const Json admin = r.value("adminAccess", Json());
    if (admin.is_boolean() && admin.get<bool>()) return true;
  }
  return false;
}

// A full GPU: its minor and PCI bus ID from the inventory, else the minor from its name.
absl::StatusOr<RecordedDevice> ConvertGpu(const Json& gpu, const std::string& path,
                                          const Inventory& inventory) {
  RecordedDevice p;
  p.type = DeviceType::kGpu;
  RETURN_IF_ERROR(FromGoDev(gpu.value("device", Json()), path + ".gpu.device", &p.kubelet));
  ASSIGN_OR_RETURN(p.uuid, StringAt(gpu.value("info", Json::object()), "uuid", path + ".gpu.info"));
  const AllocatableDevice* known = inventory.Find(p.kubelet.device_name);
  if (known != nullptr && known->type == DeviceType::kGpu && known->gpu.uuid == p.uuid) {
    p.minor = known->gpu.minor;
    p.pci_bus_id = known->gpu.pci_bus_id;
  } else if (std::optional<unsigned> minor = ParseName(p.kubelet.device_name).minor) {
    p.minor = *minor;
  } else {
    return Bad(path, absl::StrCat("GPU \"", p.kubelet.device_name,
                                  "\" is not on this node and its name has no minor"));
  }
  return p;
}

// A static MIG device: the Go record's identity, with profile and placement from the inventory
// (or, for a device this node no longer has, what its name says).
absl::StatusOr<RecordedDevice> ConvertMig(const Json& mig, const std::string& path,
                                          const Inventory& inventory) {
  RecordedDevice p;
  p.type = DeviceType::kMig;
  RETURN_IF_ERROR(FromGoDev(mig.value("device", Json()), path + ".mig.device", &p.kubelet));
  const Json concrete = mig.value("concrete", Json::object());
  const std::string cpath = path + ".mig.concrete";
  MigInfo info;
  ASSIGN_OR_RETURN(info.uuid, StringAt(concrete, "migUUID", cpath));
  ASSIGN_OR_RETURN(info.parent_uuid, StringAt(concrete, "parentUUID", cpath));
  ASSIGN_OR_RETURN(info.parent_pci_bus_id,
                   StringAt(concrete, "parentPCIBusID", cpath, /*required=*/false));
  ASSIGN_OR_RETURN(info.parent_minor, UintAt(concrete, "parentMinor", cpath));
  ASSIGN_OR_RETURN(info.gi_id, UintAt(concrete, "giId", cpath));
  ASSIGN_OR_RETURN(info.ci_id, UintAt(concrete, "ciId", cpath));
  const AllocatableDevice* known = inventory.Find(p.kubelet.device_name);
  if (known != nullptr && known->mig && known->mig->uuid == info.uuid) {
    info.profile = known->mig->profile;
    info.gi_profile_id = known->mig->gi_profile_id;
    info.placement_start = known->mig->placement_start;
    info.placement_size = known->mig->placement_size;
    if (info.parent_pci_bus_id.empty()) info.parent_pci_bus_id = known->gpu.pci_bus_id;
  } else {
    const NameParts parts = ParseName(p.kubelet.device_name);
    info.profile = parts.profile;
    info.gi_profile_id = parts.gi_profile_id.value_or(0);
    info.placement_start = parts.placement_start.value_or(0);
  }
  p.uuid = info.uuid;
  p.minor = info.parent_minor;
  p.pci_bus_id = info.parent_pci_bus_id;
  p.mig = std::move(info);
  return p;
}

// A VFIO device: the GPU's minor (and PCI bus ID, when the record lacks it) from this node's
// device of the same name and UUID (a "gpu-vfio-<index>" name says nothing about the minor).
// The Go record carries no journal of the vfio steps (claim_steps.h), so unprepare has nothing to
// undo and does not bind the GPU back to the nvidia driver (logged when adopted).
absl::StatusOr<RecordedDevice> ConvertVfio(const Json& vfio, const std::string& path,
                                           const Inventory& inventory) {
  RecordedDevice p;
  p.type = DeviceType::kVfio;
  RETURN_IF_ERROR(FromGoDev(vfio.value("device", Json()), path + ".vfio.device", &p.kubelet));
  const Json info = vfio.value("info", Json::object());
  ASSIGN_OR_RETURN(p.uuid, StringAt(info, "uuid", path + ".vfio.info"));
  ASSIGN_OR_RETURN(p.pci_bus_id, StringAt(info, "pciBusID", path + ".vfio.info", false));
  const AllocatableDevice* known = inventory.Find(p.kubelet.device_name);
  if (known != nullptr && known->type == DeviceType::kVfio && known->gpu.uuid == p.uuid) {
    p.minor = known->gpu.minor;
    if (p.pci_bus_id.empty()) p.pci_bus_id = known->gpu.pci_bus_id;
  }
  DRA_WARNING(
      "adopted a VFIO device from the Go driver's checkpoint; unprepare will not bind it back to "
      "the nvidia driver",
      "device", p.kubelet.device_name, "pciBusID", p.pci_bus_id);
  return p;
}

}  // namespace

absl::StatusOr<std::vector<RecordedDevice>> PreparedDevicesFromGo(
    const Json& groups, const Json& allocation, const Inventory& inventory,
    const std::string& mps_namespace) {
  std::vector<RecordedDevice> out;
  if (groups.is_null()) return out;
  if (!groups.is_array()) return Bad("preparedDevices", "expected a list of groups");
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string gpath = absl::StrCat("preparedDevices[", g, "]");
    const Json& group = groups[g];
    if (!group.is_object()) return Bad(gpath, "expected object");
    const Json devices = group.value("devices", Json::array());
    if (!devices.is_array()) return Bad(gpath, "\"devices\": expected a list");
    Json state = group.value("configState", Json::object());
    if (state.is_null()) state = Json::object();
    if (!state.is_object()) return Bad(gpath, "\"configState\": expected object");
    std::optional<bool> time_slice_applied;
    if (auto it = state.find("timeSliceApplied"); it != state.end() && !it->is_null()) {
      if (!it->is_boolean()) return Bad(gpath, "\"timeSliceApplied\": expected bool");
      time_slice_applied = it->get<bool>();
    }
    ASSIGN_OR_RETURN(std::string mps_id,
                     StringAt(state, "mpsControlDaemonID", gpath + ".configState", false));

    const size_t first = out.size();
    for (size_t i = 0; i < devices.size(); ++i) {
      const std::string path = absl::StrCat(gpath, ".devices[", i, "]");
      const Json& d = devices[i];
      if (!d.is_object()) return Bad(path, "expected object");
      absl::StatusOr<RecordedDevice> p;
      if (d.value("gpu", Json()).is_object()) {
        p = ConvertGpu(d["gpu"], path, inventory);
      } else if (d.value("mig", Json()).is_object()) {
        p = ConvertMig(d["mig"], path, inventory);
      } else if (d.value("vfio", Json()).is_object()) {
        p = ConvertVfio(d["vfio"], path, inventory);
      } else {
        return Bad(path, "neither a gpu, a mig nor a vfio device");
      }
      if (!p.ok()) return p.status();
      p->admin_access = AdminAccessOf(allocation, p->kubelet);
      if (p->type == DeviceType::kGpu) p->time_slice_applied = time_slice_applied;
      out.push_back(*std::move(p));
    }
    if (mps_id.empty()) continue;
    MpsDaemonRecord record{.id = mps_id, .ns = mps_namespace};
    std::set<std::string> seen;
    for (size_t i = first; i < out.size(); ++i) {
      if (out[i].type == DeviceType::kGpu && seen.insert(out[i].uuid).second) {
        record.full_gpu_uuids.push_back(out[i].uuid);
      }
    }
    // The same check as when the record is read back: an id unprepare could not use is an error
    // now rather than a claim whose daemon is never stopped.
    absl::StatusOr<MpsDaemonRecord> valid = MpsDaemonRecordFromJson(MpsDaemonRecordToJson(record));
    if (!valid.ok()) return Annotate(valid.status(), gpath + ".configState.mpsControlDaemonID");
    for (size_t i = first; i < out.size(); ++i) out[i].mps_daemon = record;
  }
  return out;
}

checkpoint::GoDevicesConverter GoDevicesConverter(Inventory inventory, std::string mps_namespace) {
  return [inventory = std::move(inventory), ns = std::move(mps_namespace)](
             const std::string& claim_uid, const Json& go_devices,
             const Json& allocation) -> absl::StatusOr<Json> {
    absl::StatusOr<std::vector<RecordedDevice>> devices =
        PreparedDevicesFromGo(go_devices, allocation, inventory, ns);
    if (!devices.ok()) return devices.status();
    return PreparedDevicesToJson(*devices);
  };
}

}  // namespace dra::gpu
