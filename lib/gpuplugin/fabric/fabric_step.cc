#include "lib/gpuplugin/fabric/fabric_step.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::gpu {
namespace {

using checkpoint::ClaimMap;

bool IsPhysicalGpu(DeviceType t) { return t == DeviceType::kGpu || t == DeviceType::kVfio; }

nlohmann::json TargetToJson(const FabricTarget& t) {
  return {{"partition", t.partition}, {"modules", t.modules}, {"gpus", t.gpus}};
}

// Reads j[key] into *out: a list whose every entry passes `is` ("<path>.<key>: expected a list
// of <what>" otherwise).
template <typename T>
absl::Status ReadList(const nlohmann::json& j, const std::string& path, const char* key,
                      const char* what, bool (nlohmann::json::*is)() const noexcept,
                      std::vector<T>* out) {
  auto list = j.find(key);
  bool ok = list != j.end() && list->is_array();
  for (size_t i = 0; ok && i < list->size(); ++i) ok = ((*list)[i].*is)();
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".", key, ": expected a list of ", what));
  }
  for (const nlohmann::json& e : *list) out->push_back(e.get<T>());
  return absl::OkStatus();
}

absl::StatusOr<FabricTarget> TargetFromJson(const nlohmann::json& j) {
  const std::string path = "fabricPartition undo";
  if (!j.is_object()) return absl::InvalidArgumentError(path + ": expected an object");
  FabricTarget t;
  auto id = j.find("partition");
  if (id == j.end() || !id->is_number_unsigned()) {
    return absl::InvalidArgumentError(path + ".partition: expected an unsigned integer");
  }
  t.partition = id->get<fm::abi::PartitionId>();
  RETURN_IF_ERROR(ReadList(j, path, "modules", "unsigned integers",
                           &nlohmann::json::is_number_unsigned, &t.modules));
  RETURN_IF_ERROR(ReadList(j, path, "gpus", "PCI bus ids", &nlohmann::json::is_string, &t.gpus));
  return t;
}

class FabricPartition final : public prepare::PlanStep {
 public:
  FabricPartition(FabricTarget target, const fm::FabricManager* manager)
      : target_(std::move(target)), manager_(manager) {}
  std::string name() const override { return kFabricPartitionStep; }
  nlohmann::json UndoData() const override { return TargetToJson(target_); }
  bool external() const override { return true; }    // FM's state
  bool resumable() const override { return false; }  // an activation happens or it does not
  absl::Status Apply(const Deadline& deadline) override {
    if (manager_ == nullptr) {
      return absl::InternalError(
          "fabric partition needed but this plugin has no fabric manager connection");
    }
    RETURN_IF_ERROR(deadline.Check(absl::StrCat("activate fabric partition ", target_.partition)));
    RETURN_IF_ERROR(
        Annotate(manager_->Activate(target_.partition),
                 absl::StrCat("fabric manager: activate partition ", target_.partition,
                              " (GPU modules ", absl::StrJoin(target_.modules, " "), ")")));
    DRA_INFO("fabric partition active", "partition", target_.partition, "modules",
             absl::StrJoin(target_.modules, ","));
    return absl::OkStatus();
  }

 private:
  const FabricTarget target_;
  const fm::FabricManager* const manager_;
};

}  // namespace

absl::StatusOr<FabricPartitioning> LoadFabricPartitioning(const fm::FabricManager* manager,
                                                          const Inventory& inventory) {
  FabricPartitioning out{.manager = manager};
  ASSIGN_OR_RETURN(out.partitions, manager->Partitions());
  RETURN_IF_ERROR(fm::ValidatePartitions(out.partitions));
  for (const AllocatableDevice& d : inventory.devices) {
    if (d.gpu.module_id && !d.gpu.pci_bus_id.empty()) {
      out.module_by_bus_id[d.gpu.pci_bus_id] = *d.gpu.module_id;
    }
  }
  return out;
}

void AddFabricAttributes(Inventory& inventory, const FabricPartitioning& fabric) {
  for (AllocatableDevice& d : inventory.devices) {
    if (!IsPhysicalGpu(d.type)) continue;
    auto it = fabric.module_by_bus_id.find(d.gpu.pci_bus_id);
    if (it == fabric.module_by_bus_id.end()) continue;
    const unsigned int module = it->second;
    if (module != 0) {
      d.published.attributes["gpuModuleID"] = k8s::DeviceAttribute::Int(module);
    }
    for (const fm::Partition& p : fabric.partitions) {
      if (std::find(p.module_ids.begin(), p.module_ids.end(), module) == p.module_ids.end()) {
        continue;
      }
      const std::string key = absl::StrCat("partition", p.module_ids.size());
      if (!d.published.attributes.contains(key)) {
        d.published.attributes[key] = k8s::DeviceAttribute::Int(p.id);
      }
    }
  }
}

absl::StatusOr<std::optional<FabricTarget>> FabricTargetOf(
    const FabricPartitioning& fabric, const std::vector<RecordedDevice>& devices) {
  std::set<unsigned int> modules;
  std::set<std::string> gpus;
  for (const RecordedDevice& d : devices) {
    if (!IsPhysicalGpu(d.type) || !gpus.insert(d.pci_bus_id).second) continue;
    auto it = fabric.module_by_bus_id.find(d.pci_bus_id);
    if (it == fabric.module_by_bus_id.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "fabric manager: GPU module ID of device ", d.kubelet.device_name, " (PCI bus id ",
          d.pci_bus_id, ") is unknown; refusing partition activation"));
    }
    modules.insert(it->second);
  }
  if (gpus.empty()) return std::nullopt;
  const fm::Partition* p = fm::FindExactPartition(fabric.partitions, modules);
  if (p == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("fabric manager: GPU module set [", absl::StrJoin(modules, " "),
                     "] does not match any FM partition; refusing partition activation"));
  }
  return FabricTarget{.partition = p->id,
                      .modules = std::vector<unsigned int>(modules.begin(), modules.end()),
                      .gpus = std::vector<std::string>(gpus.begin(), gpus.end())};
}

std::unique_ptr<prepare::PlanStep> FabricPartitionStep(FabricTarget target,
                                                       const fm::FabricManager* manager) {
  return std::make_unique<FabricPartition>(std::move(target), manager);
}

absl::Status UndoFabricPartition(const std::string& uid, const ClaimMap& all,
                                 const fm::FabricManager* manager, const nlohmann::json& undo) {
  ASSIGN_OR_RETURN(FabricTarget target, TargetFromJson(undo));
  const std::set<std::string> mine(target.gpus.begin(), target.gpus.end());
  for (const auto& [other_uid, other] : all) {
    if (other_uid == uid) continue;
    absl::StatusOr<std::vector<RecordedDevice>> devices =
        PreparedDevicesFromJson(other.prepared_devices);
    if (!devices.ok()) continue;
    for (const RecordedDevice& d : *devices) {
      if (IsPhysicalGpu(d.type) && mine.contains(d.pci_bus_id)) {
        DRA_INFO("fabric partition still used by another claim; keeping it active", "claim", uid,
                 "partition", target.partition, "other", other_uid, "gpu", d.pci_bus_id);
        return absl::OkStatus();
      }
    }
  }
  if (manager == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fabric partition ", target.partition,
        " needs to be deactivated but this plugin has no fabric manager connection (gate "
        "FabricManagerPartitioning off, or no fabric found?)"));
  }
  RETURN_IF_ERROR(
      Annotate(manager->Deactivate(target.partition),
               absl::StrCat("fabric manager: deactivate partition ", target.partition)));
  DRA_INFO("fabric partition deactivated", "claim", uid, "partition", target.partition);
  return absl::OkStatus();
}

}  // namespace dra::gpu
