#include "lib/gpuplugin/record/go_export.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/go_format.h"
#include "lib/common/atomic_file.h"
#include "lib/common/file_lock.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/kubeletplugin/plugin_types.h"

namespace dra::gpu {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

// --- The claim's allocation in resource.k8s.io/v1's field order ---------------------------------

// A member as Go's encoding/json would write the decoded field: `required` fields always (the
// zero value when missing), omitempty ones only when set and not empty.
enum class Rule { kRequired, kOmitEmpty, kPointer };

bool Empty(const Json& v) {
  return v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty()) ||
         (v.is_array() && v.empty()) || (v.is_object() && v.empty()) ||
         (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v == 0);
}

// Copies in[key] to out[key] by `rule`, converted by `convert` (identity when null).
void Put(const Json& in, const char* key, Rule rule, OJson& out, const Json& zero = "",
         OJson (*convert)(const Json&) = nullptr) {
  const Json v = in.is_object() ? in.value(key, Json()) : Json();
  if (rule == Rule::kRequired && v.is_null()) {
    out[key] = OJson(zero);
    return;
  }
  if (v.is_null()) return;
  if (rule == Rule::kOmitEmpty && Empty(v)) return;
  out[key] = convert != nullptr ? convert(v) : OJson(v);
}

// Each element of a list through `convert`.
OJson ListOf(const Json& v, OJson (*convert)(const Json&)) {
  OJson out = OJson::array();
  if (!v.is_array()) return out;
  for (const Json& e : v) out.push_back(convert(e));
  return out;
}

OJson Toleration(const Json& t) {
  OJson out = OJson::object();
  for (const char* key : {"key", "operator", "value", "effect"}) Put(t, key, Rule::kOmitEmpty, out);
  Put(t, "tolerationSeconds", Rule::kPointer, out);
  return out;
}
OJson Tolerations(const Json& v) { return ListOf(v, Toleration); }

OJson Result(const Json& r) {
  OJson out = OJson::object();
  for (const char* key : {"request", "driver", "pool", "device"}) Put(r, key, Rule::kRequired, out);
  Put(r, "adminAccess", Rule::kPointer, out);
  Put(r, "tolerations", Rule::kOmitEmpty, out, "", Tolerations);
  Put(r, "bindingConditions", Rule::kOmitEmpty, out);
  Put(r, "bindingFailureConditions", Rule::kOmitEmpty, out);
  Put(r, "shareID", Rule::kPointer, out);
  Put(r, "consumedCapacity", Rule::kOmitEmpty, out);  // a map: Go sorts its keys, as nlohmann does
  return out;
}
OJson Results(const Json& v) { return ListOf(v, Result); }

OJson Opaque(const Json& o) {
  OJson out = OJson::object();
  Put(o, "driver", Rule::kRequired, out);
  // runtime.RawExtension: Go writes the raw bytes (compacted) as they were read, so any key order
  // survives its re-marshalling.
  Put(o, "parameters", Rule::kRequired, out, Json());
  return out;
}

OJson Config(const Json& c) {
  OJson out = OJson::object();
  Put(c, "source", Rule::kRequired, out);
  Put(c, "requests", Rule::kOmitEmpty, out);
  Put(c, "opaque", Rule::kPointer, out, "", Opaque);  // DeviceConfiguration, inlined
  return out;
}
OJson Configs(const Json& v) { return ListOf(v, Config); }

OJson Requirement(const Json& r) {
  OJson out = OJson::object();
  Put(r, "key", Rule::kRequired, out);
  Put(r, "operator", Rule::kRequired, out);
  Put(r, "values", Rule::kOmitEmpty, out);
  return out;
}
OJson Requirements(const Json& v) { return ListOf(v, Requirement); }

OJson Term(const Json& t) {
  OJson out = OJson::object();
  Put(t, "matchExpressions", Rule::kOmitEmpty, out, "", Requirements);
  Put(t, "matchFields", Rule::kOmitEmpty, out, "", Requirements);
  return out;
}
OJson Terms(const Json& v) { return ListOf(v, Term); }

OJson NodeSelector(const Json& s) {
  OJson out = OJson::object();
  Put(s, "nodeSelectorTerms", Rule::kRequired, out, Json(), Terms);
  return out;
}

OJson DeviceResults(const Json& d) {
  OJson out = OJson::object();
  Put(d, "results", Rule::kOmitEmpty, out, "", Results);
  Put(d, "config", Rule::kOmitEmpty, out, "", Configs);
  return out;
}

// ResourceClaimStatus{Allocation: allocation} as Go writes it.
OJson GoStatus(const Json& allocation) {
  OJson status = OJson::object();
  if (allocation.is_null()) return status;
  OJson a = OJson::object();
  // AllocationResult.Devices is a struct: omitempty does not apply, Go always writes it.
  a["devices"] = DeviceResults(allocation.value("devices", Json::object()));
  Put(allocation, "nodeSelector", Rule::kPointer, a, "", NodeSelector);
  Put(allocation, "allocationTimestamp", Rule::kPointer, a);
  status["allocation"] = std::move(a);
  return status;
}

// --- Devices -------------------------------------------------------------------------------------

// kubeletplugin.Device, as "v1"/"v2" hold it (no JSON tags: capitalised, nothing omitted).
OJson DeviceV2(const kubeletplugin::PreparedDevice& d) {
  return OJson{{"Requests", d.request_names},
               {"PoolName", d.pool_name},
               {"DeviceName", d.device_name},
               {"CDIDeviceIDs", d.cdi_device_ids}};
}

// CheckpointDevice, as "v3" holds it (every field omitempty).
OJson DeviceV3(const kubeletplugin::PreparedDevice& d) {
  OJson out = OJson::object();
  if (!d.request_names.empty()) out["requests"] = d.request_names;
  if (!d.pool_name.empty()) out["poolName"] = d.pool_name;
  if (!d.device_name.empty()) out["deviceName"] = d.device_name;
  if (!d.cdi_device_ids.empty()) out["cdiDeviceIDs"] = d.cdi_device_ids;
  return out;
}

// The device's own member ("gpu", "mig" or "vfio") with `device` as its D.
std::pair<const char*, OJson> Member(const RecordedDevice& p, OJson device) {
  switch (p.type) {
    case DeviceType::kGpu:
      return {"gpu", OJson{{"info", OJson{{"uuid", p.uuid}}}, {"device", std::move(device)}}};
    case DeviceType::kMig: {
      OJson concrete{{"parentMinor", p.mig->parent_minor},
                     {"giId", p.mig->gi_id},
                     {"ciId", p.mig->ci_id},
                     {"migUUID", p.mig->uuid},
                     {"parentUUID", p.mig->parent_uuid}};
      if (!p.mig->parent_pci_bus_id.empty()) {
        concrete["parentPCIBusID"] = p.mig->parent_pci_bus_id;
      }
      return {"mig", OJson{{"concrete", std::move(concrete)}, {"device", std::move(device)}}};
    }
    case DeviceType::kVfio: {
      OJson info{{"uuid", p.uuid}};
      if (!p.pci_bus_id.empty()) info["pciBusID"] = p.pci_bus_id;
      return {"vfio", OJson{{"info", std::move(info)}, {"device", std::move(device)}}};
    }
  }
  return {"gpu", OJson()};
}

OJson PreparedDeviceV2(const RecordedDevice& p) {
  auto [key, member] = Member(p, DeviceV2(p.kubelet));
  // PreparedDevice{Gpu `json:"gpu"`, Mig `json:"mig"`, Vfio `json:"vfio,omitempty"`}.
  OJson out{{"gpu", nullptr}, {"mig", nullptr}};
  out[key] = std::move(member);
  return out;
}

OJson PreparedDeviceV3(const RecordedDevice& p) {
  auto [key, member] = Member(p, DeviceV3(p.kubelet));
  OJson out = OJson::object();  // every member omitempty
  out[key] = std::move(member);
  return out;
}

// One config group: consecutive devices with the same MPS daemon and, among full GPUs, the same
// time-slice flag (the Go driver records its per-config groups in the order of its configs).
struct Group {
  std::string mps_id;
  std::optional<bool> time_slice_applied;
  bool has_gpu = false;
  std::vector<const RecordedDevice*> devices;
};

std::vector<Group> Grouped(const std::vector<RecordedDevice>& devices) {
  std::vector<Group> groups;
  for (const RecordedDevice& p : devices) {
    const std::string mps_id = p.mps_daemon ? p.mps_daemon->id : "";
    const bool gpu = p.type == DeviceType::kGpu;
    Group* last = groups.empty() ? nullptr : &groups.back();
    const bool joins = last != nullptr && last->mps_id == mps_id &&
                       (!gpu || !last->has_gpu || last->time_slice_applied == p.time_slice_applied);
    if (!joins) {
      groups.push_back(Group{.mps_id = mps_id});
      last = &groups.back();
    }
    if (gpu && !last->has_gpu) {
      last->has_gpu = true;
      last->time_slice_applied = p.time_slice_applied;
    }
    last->devices.push_back(&p);
  }
  return groups;
}

OJson ConfigState(const Group& g) {
  // DeviceConfigState{MpsControlDaemonID `json:"mpsControlDaemonID"`, MpsApplied omitempty,
  // TimeSliceApplied omitempty}. MpsApplied is not recorded here; the Go driver reads its absence
  // as it does in records written before it had the field.
  OJson out{{"mpsControlDaemonID", g.mps_id}};
  if (g.time_slice_applied) out["timeSliceApplied"] = *g.time_slice_applied;
  return out;
}

OJson GroupsJson(const std::vector<Group>& groups, OJson (*device)(const RecordedDevice&)) {
  OJson out = OJson::array();
  for (const Group& g : groups) {
    OJson list = OJson::array();
    for (const RecordedDevice* p : g.devices) list.push_back(device(*p));
    out.push_back(OJson{{"devices", std::move(list)}, {"configState", ConfigState(g)}});
  }
  return out;
}

std::string ClaimLabel(const checkpoint::PreparedClaim& c) {
  if (c.name.empty()) return absl::StrCat("claim ", c.uid);
  return absl::StrCat("claim ", c.namespace_name, "/", c.name, " (uid ", c.uid, ")");
}

// The checksum of one section: the Go checksum of its compact JSON with "checksum" 0.
uint64_t SectionChecksum(OJson section) {
  section["checksum"] = 0;
  return checkpoint::GoChecksum(checkpoint::GoJsonMarshal(section));
}

}  // namespace

absl::StatusOr<std::string> GoCheckpointText(const checkpoint::Contents& contents) {
  OJson v1_claims = OJson::object(), v2_claims = OJson::object(), v3_claims = OJson::object();
  // contents.claims is a std::map: uids in sorted order, as Go writes a map's keys.
  for (const auto& [uid, claim] : contents.claims) {
    if (claim.state != checkpoint::ClaimState::kPrepareCompleted) {
      return absl::InvalidArgumentError(absl::StrCat(
          ClaimLabel(claim), ": state ", checkpoint::ClaimStateName(claim.state),
          ": a prepare is in progress or failed part-way, and the public driver's checkpoint "
          "records no devices for such a claim, so it could not undo what the prepare set up; "
          "only PrepareCompleted claims can be exported. Let the kubelet finish or unprepare it, "
          "then export again"));
    }
    absl::StatusOr<std::vector<RecordedDevice>> devices =
        PreparedDevicesFromJson(claim.prepared_devices);
    if (!devices.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ClaimLabel(claim), ": preparedDevices: ", devices.status().message()));
    }
    for (const RecordedDevice& p : *devices) {
      if (p.type == DeviceType::kMig && (!p.mig || p.mig->dynamic)) {
        return absl::InvalidArgumentError(absl::StrCat(
            ClaimLabel(claim), ": device ", p.kubelet.device_name,
            " is a DynamicMIG device, which the public driver's checkpoint cannot record (it would "
            "not destroy the MIG device at unprepare); only full GPUs, static MIG devices and "
            "VFIO devices can be exported"));
      }
    }
    const std::vector<Group> groups = Grouped(*devices);
    const OJson status = GoStatus(claim.allocation);

    // PreparedClaimV2/V3{CheckpointState, Status, PreparedDevices omitempty, Name omitempty,
    // Namespace omitempty}.
    // Captured by reference to the binding's object: clang before 16 cannot capture a structured
    // binding in a lambda.
    const auto& named = claim;
    auto entry = [&status, &named](OJson groups_json) {
      OJson e{{"checkpointState", "PrepareCompleted"}, {"status", status}};
      if (!groups_json.empty()) e["preparedDevices"] = std::move(groups_json);
      if (!named.name.empty()) e["name"] = named.name;
      if (!named.namespace_name.empty()) e["namespace"] = named.namespace_name;
      return e;
    };
    OJson v2_groups = GroupsJson(groups, PreparedDeviceV2);
    OJson v1_entry{{"status", status}};
    if (!v2_groups.empty()) v1_entry["preparedDevices"] = v2_groups;
    v1_claims[uid] = std::move(v1_entry);
    v2_claims[uid] = entry(std::move(v2_groups));
    v3_claims[uid] = entry(GroupsJson(groups, PreparedDeviceV3));
  }

  OJson v1 = OJson::object();
  if (!v1_claims.empty()) v1["preparedClaims"] = std::move(v1_claims);
  OJson v2{{"checksum", 0}};
  if (!v2_claims.empty()) v2["preparedClaims"] = std::move(v2_claims);
  v2["nodeBootID"] = contents.node_boot_id;
  v2["checksum"] = SectionChecksum(v2);
  OJson v3{{"checksum", 0}};
  if (!v3_claims.empty()) v3["preparedClaims"] = std::move(v3_claims);
  v3["checksum"] = SectionChecksum(v3);

  // The top-level checksum covers the file without "v2" and "v3" (the Go driver's SetChecksumV1).
  OJson top{{"checksum", 0}, {"v1", std::move(v1)}};
  top["checksum"] = SectionChecksum(top);
  top["v2"] = std::move(v2);
  top["v3"] = std::move(v3);
  return checkpoint::GoJsonMarshal(top);
}

absl::StatusOr<GoExportResult> ExportGoCheckpoint(const std::string& checkpoint_path,
                                                  const std::string& output_path) {
  namespace fs = std::filesystem;
  // The plugin's lock on the checkpoint, so that a read-modify-write of a plugin still running is
  // not interleaved with this read (and, for the checkpoint's own path, this write).
  const std::string dir = fs::path(checkpoint_path).parent_path().string();
  ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire((dir.empty() ? std::string(".") : dir) + "/" +
                                                        checkpoint::kLockFileName,
                                                    absl::Seconds(10)));
  ASSIGN_OR_RETURN(std::string text, ReadFile(checkpoint_path));
  if (checkpoint::LooksLikeGoCheckpoint(text)) {
    return absl::FailedPreconditionError(
        absl::StrCat(checkpoint_path, " is already in the public driver's format"));
  }
  absl::StatusOr<checkpoint::Contents> contents = checkpoint::DecodeCheckpoint(text);
  if (!contents.ok()) {
    return Annotate(contents.status(), absl::StrCat("read ", checkpoint_path));
  }
  ASSIGN_OR_RETURN(std::string go, GoCheckpointText(*contents));

  GoExportResult result;
  result.claims = contents->claims.size();
  std::error_code ec;
  if (fs::equivalent(checkpoint_path, output_path, ec)) {
    // Our file is about to be replaced: keep its bytes for a way back to this driver.
    const std::string base =
        absl::StrCat(checkpoint_path, ".cpp-driver-", absl::ToUnixSeconds(absl::Now()));
    std::string kept = base;
    for (int n = 1; fs::exists(kept); ++n) kept = absl::StrCat(base, ".", n);
    RETURN_IF_ERROR(WriteFileAtomically(kept, text, 0644));
    result.kept_ours = kept;
  }
  RETURN_IF_ERROR(WriteFileAtomically(output_path, go, 0644));
  return result;
}

absl::Status CheckNoPluginServing(const std::string& plugin_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(plugin_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("dra", 0) != 0 || !name.ends_with(".sock")) continue;
    const std::string path = e.path().string();
    sockaddr_un addr{};
    if (path.size() >= sizeof(addr.sun_path)) continue;
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const bool serving = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (serving) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a gpu-kubelet-plugin serves on ", path,
          ": it would adopt the exported file back into its own format at its next checkpoint "
          "read; stop it first (helm uninstall with kubeletPlugin.removeFilesOnUninstall=false, "
          "or take the plugin off the node), or write elsewhere with --output"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dra::gpu
