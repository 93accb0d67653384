#include "lib/gpuplugin/mig/mig_step.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

struct Entry {
  std::string device;
  MigInfo spec;
};

nlohmann::json EntryToJson(const Entry& e, const MigInfo* created) {
  nlohmann::json j = {{"device", e.device},
                      {"gpu", e.spec.parent_uuid},
                      {"profile", e.spec.profile},
                      {"profileId", e.spec.gi_profile_id},
                      {"start", e.spec.placement_start},
                      {"size", e.spec.placement_size}};
  if (created != nullptr) {
    j["uuid"] = created->uuid;
    j["gi"] = created->gi_id;
    j["ci"] = created->ci_id;
  }
  return j;
}

absl::StatusOr<MigInfo> EntryFromJson(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(path + ": expected an object");
  auto str = [&](const char* key) -> absl::StatusOr<std::string> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".", key, ": expected a non-empty string"));
    }
    return it->get<std::string>();
  };
  auto num = [&](const char* key) -> absl::StatusOr<unsigned int> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".", key, ": expected an unsigned integer"));
    }
    return it->get<unsigned int>();
  };
  MigInfo m;
  m.dynamic = true;
  ASSIGN_OR_RETURN(m.parent_uuid, str("gpu"));
  ASSIGN_OR_RETURN(m.profile, str("profile"));
  ASSIGN_OR_RETURN(m.gi_profile_id, num("profileId"));
  ASSIGN_OR_RETURN(m.placement_start, num("start"));
  ASSIGN_OR_RETURN(m.placement_size, num("size"));
  return m;
}

class MigDevices final : public prepare::PlanStep {
 public:
  MigDevices(std::vector<Entry> entries, const MigManager* mig, CreatedMigDevices* created)
      : entries_(std::move(entries)), mig_(mig), created_(created) {}
  std::string name() const override { return kMigDevicesStep; }
  nlohmann::json UndoData() const override {
    nlohmann::json out = nlohmann::json::array();
    for (const Entry& e : entries_) {
      auto it = created_->find(e.device);
      out.push_back(EntryToJson(e, it == created_->end() ? nullptr : &it->second));
    }
    return out;
  }
  bool external() const override { return true; }
  // A GPU instance without its compute instance, or some devices of the claim without the
  // others: a repeated Apply finishes them, and Undo removes them by placement.
  bool resumable() const override { return true; }
  absl::Status Apply(const Deadline& deadline) override {
    if (mig_ == nullptr) {
      return absl::InternalError("dynamic MIG device requested but this plugin has no MIG manager");
    }
    for (const Entry& e : entries_) {
      RETURN_IF_ERROR(deadline.Check("create MIG device " + e.device));
      ASSIGN_OR_RETURN(MigInfo created, mig_->Create(e.spec));
      (*created_)[e.device] = std::move(created);
    }
    return absl::OkStatus();
  }

 private:
  const std::vector<Entry> entries_;
  const MigManager* const mig_;
  CreatedMigDevices* const created_;
};

}  // namespace

std::unique_ptr<prepare::PlanStep> MigDevicesStep(const std::vector<RecordedDevice>& devices,
                                                  const MigManager* mig,
                                                  CreatedMigDevices* created) {
  std::vector<Entry> entries;
  for (const RecordedDevice& d : devices) {
    if (d.mig && d.mig->dynamic) entries.push_back({d.kubelet.device_name, *d.mig});
  }
  if (entries.empty()) return nullptr;
  return std::make_unique<MigDevices>(std::move(entries), mig, created);
}

std::vector<RecordedDevice> WithCreatedMig(std::vector<RecordedDevice> devices,
                                           const CreatedMigDevices& created) {
  for (RecordedDevice& d : devices) {
    auto it = created.find(d.kubelet.device_name);
    if (it == created.end()) continue;
    d.mig = it->second;
    d.uuid = it->second.uuid;
  }
  return devices;
}

absl::Status UndoMigDevices(const MigManager* mig, const nlohmann::json& undo) {
  if (!undo.is_array()) return absl::InvalidArgumentError("migDevices undo: expected a list");
  std::vector<MigInfo> specs;
  for (size_t i = 0; i < undo.size(); ++i) {
    ASSIGN_OR_RETURN(MigInfo spec,
                     EntryFromJson(undo[i], absl::StrCat("migDevices undo[", i, "]")));
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return absl::OkStatus();
  if (mig == nullptr) {
    return absl::FailedPreconditionError(
        "MIG devices need to be destroyed but this plugin has no MIG manager (gate DynamicMIG "
        "off?)");
  }
  for (size_t i = specs.size(); i-- > 0;) RETURN_IF_ERROR(mig->Destroy(specs[i]));
  DRA_INFO("destroyed the claim's MIG devices", "count", specs.size());
  return absl::OkStatus();
}

}  // namespace dra::gpu
