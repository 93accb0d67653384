#include "lib/gpuplugin/vfio/vfio_claim.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"
#include "lib/gpuplugin/record/prepared.h"

namespace dra::gpu {

void AddVfioDevices(Inventory& inventory, std::vector<VfioDevice> vfio, VfioPlanning* planning) {
  std::set<std::string> static_mig_gpus;
  for (const AllocatableDevice& d : inventory.devices) {
    if (d.type == DeviceType::kMig && d.mig && !d.mig->dynamic) {
      static_mig_gpus.insert(d.gpu.pci_bus_id);
    }
  }
  // DynamicMIG: a GPU's counter set by its PCI bus id (from the devices that consume it).
  std::map<std::string, const k8s::CounterSet*> counters_by_bus_id;
  for (const AllocatableDevice& d : inventory.devices) {
    for (const k8s::DeviceCounterConsumption& c : d.published.consumes_counters) {
      for (const k8s::CounterSet& set : inventory.counter_sets) {
        if (set.name == c.counter_set) counters_by_bus_id.emplace(d.gpu.pci_bus_id, &set);
      }
    }
  }
  for (VfioDevice& v : vfio) {
    if (static_mig_gpus.contains(v.pci.bus_id)) continue;
    if (planning != nullptr) planning->devices[v.device.name] = v.pci;
    if (auto it = counters_by_bus_id.find(v.pci.bus_id); it != counters_by_bus_id.end()) {
      // The whole GPU: the scheduler cannot allocate it together with any of its MIG devices.
      k8s::DeviceCounterConsumption all;
      all.counter_set = it->second->name;
      all.counters = it->second->counters;
      v.device.published.consumes_counters = {std::move(all)};
    }
    inventory.devices.push_back(std::move(v.device));
  }
  std::sort(inventory.devices.begin(), inventory.devices.end(),
            [](const AllocatableDevice& a, const AllocatableDevice& b) { return a.name < b.name; });
}

std::string VfioSibling(const Inventory& inventory, const std::string& name) {
  const AllocatableDevice* d = inventory.Find(name);
  if (d == nullptr || d->type == DeviceType::kMig || d->gpu.pci_bus_id.empty()) return "";
  const DeviceType other = d->type == DeviceType::kVfio ? DeviceType::kGpu : DeviceType::kVfio;
  for (const AllocatableDevice& s : inventory.devices) {
    if (s.type == other && s.gpu.pci_bus_id == d->gpu.pci_bus_id) return s.name;
  }
  return "";
}

std::set<std::string> RecordedDeviceNames(const checkpoint::ClaimMap& claims) {
  std::set<std::string> out;
  for (const auto& [uid, claim] : claims) {
    absl::StatusOr<std::vector<RecordedDevice>> devices =
        PreparedDevicesFromJson(claim.prepared_devices);
    if (!devices.ok()) continue;
    for (const RecordedDevice& p : *devices) out.insert(p.kubelet.device_name);
  }
  return out;
}

namespace {

// A device on nvidia of the GPU at `bus_id` (its full GPU, else one of its MIG devices, whose gpu
// is the parent): null when NVML has none.
const AllocatableDevice* NvidiaDeviceAt(const Inventory& inventory, const std::string& bus_id) {
  const AllocatableDevice* found = nullptr;
  for (const AllocatableDevice& d : inventory.devices) {
    if (d.type == DeviceType::kVfio || d.gpu.pci_bus_id != bus_id || d.gpu.uuid.empty()) continue;
    if (d.type == DeviceType::kGpu) return &d;
    if (found == nullptr) found = &d;
  }
  return found;
}

}  // namespace

std::set<std::string> VfioHeldGpus(const Inventory& inventory, const std::set<std::string>& held) {
  std::set<std::string> out;
  for (const std::string& name : held) {
    const AllocatableDevice* d = inventory.Find(name);
    if (d == nullptr || d->type != DeviceType::kVfio) continue;
    if (const AllocatableDevice* gpu = NvidiaDeviceAt(inventory, d->gpu.pci_bus_id)) {
      out.insert(gpu->gpu.uuid);
    }
  }
  return out;
}

Inventory WithoutHeldSiblings(const Inventory& inventory, const std::set<std::string>& held) {
  std::set<std::string> hidden;
  for (const std::string& name : held) {
    std::string sibling = VfioSibling(inventory, name);
    if (!sibling.empty()) hidden.insert(std::move(sibling));
  }
  if (hidden.empty()) return inventory;
  Inventory out = inventory;
  std::erase_if(out.devices, [&](const AllocatableDevice& d) { return hidden.contains(d.name); });
  return out;
}

absl::Status CheckSiblingsFree(const Inventory& inventory, const std::string& claim_uid,
                               const std::vector<std::string>& devices,
                               const checkpoint::ClaimMap& claims) {
  std::map<std::string, std::string> siblings;  // sibling -> requested device
  for (const std::string& name : devices) {
    std::string sibling = VfioSibling(inventory, name);
    if (!sibling.empty()) siblings.emplace(std::move(sibling), name);
    // DynamicMIG: a GPU's VFIO device and its dynamic MIG devices are the same GPU too (the
    // scheduler keeps them apart through the shared counters; this catches a stale allocation).
    const AllocatableDevice* d = inventory.Find(name);
    const bool vfio = d != nullptr && d->type == DeviceType::kVfio;
    const bool dynamic_mig = d != nullptr && d->mig && d->mig->dynamic;
    if (!vfio && !dynamic_mig) continue;
    for (const AllocatableDevice& other : inventory.devices) {
      if (other.gpu.pci_bus_id != d->gpu.pci_bus_id || d->gpu.pci_bus_id.empty()) continue;
      if ((vfio && other.mig && other.mig->dynamic) ||
          (dynamic_mig && other.type == DeviceType::kVfio)) {
        siblings.emplace(other.name, name);
      }
    }
  }
  if (siblings.empty()) return absl::OkStatus();  // no VFIO devices announced: the common case
  for (const auto& [uid, claim] : claims) {
    if (uid == claim_uid) continue;
    for (const std::string& held : RecordedDeviceNames({{uid, claim}})) {
      auto it = siblings.find(held);
      if (it == siblings.end()) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "requested device ", it->second, " is the same GPU as device ", held,
          ", which is prepared for claim ", uid, "; a GPU is either on nvidia or on vfio"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<cdi::ContainerEdits> VfioCdiEdits(const PciGpu& gpu, const api::IommuConfig& iommu,
                                                 bool iommufd_available) {
  const bool use_iommufd =
      iommufd_available && iommu.backend_policy == api::IommuBackendPolicy::kPreferIommuFd;
  cdi::ContainerEdits e;
  if (use_iommufd) {
    if (gpu.iommufd_cdev.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("missing iommufd cdev for GPU ", gpu.bus_id,
                       " (no vfio-dev/vfio* in its sysfs directory)"));
    }
    e.device_nodes.push_back({.path = "/dev/vfio/devices/" + gpu.iommufd_cdev});
  } else {
    if (gpu.iommu_group < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", gpu.bus_id, " has no IOMMU group (no iommu_group link in sysfs)"));
    }
    e.device_nodes.push_back({.path = absl::StrCat("/dev/vfio/", gpu.iommu_group)});
  }
  if (iommu.enable_api_device.value_or(false)) {
    e.device_nodes.push_back({.path = use_iommufd ? "/dev/iommu" : "/dev/vfio/vfio"});
  }
  e.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  return e;
}

namespace {

class CdiEditsStep final : public prepare::PlanStep {
 public:
  CdiEditsStep(std::vector<VfioCdiRequest> requests,
               std::map<std::string, cdi::ContainerEdits>* edits)
      : requests_(std::move(requests)), edits_(edits) {}
  std::string name() const override { return kVfioCdiEditsStep; }
  nlohmann::json UndoData() const override { return nullptr; }
  bool external() const override { return false; }
  bool resumable() const override { return false; }
  absl::Status Apply(const Deadline& deadline) override {
    RETURN_IF_ERROR(deadline.Check("read the VFIO devices"));
    std::map<std::string, cdi::ContainerEdits> out;
    for (const VfioCdiRequest& r : requests_) {
      PciGpu pci = r.pci;
      std::error_code ec;
      const std::string dir = r.host_root + "/sys/bus/pci/devices/" + pci.bus_id + "/vfio-dev";
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("vfio", 0) == 0) pci.iommufd_cdev = name;
      }
      ASSIGN_OR_RETURN(out[r.device], VfioCdiEdits(pci, r.iommu, r.iommufd_available));
    }
    // Replaced, not appended: a repeated Apply must not add them twice.
    for (auto& [device, e] : out) (*edits_)[device] = std::move(e);
    return absl::OkStatus();
  }

 private:
  const std::vector<VfioCdiRequest> requests_;
  std::map<std::string, cdi::ContainerEdits>* const edits_;
};

}  // namespace

std::unique_ptr<prepare::PlanStep> VfioCdiEditsStep(
    std::vector<VfioCdiRequest> requests, std::map<std::string, cdi::ContainerEdits>* edits) {
  return std::make_unique<CdiEditsStep>(std::move(requests), edits);
}

absl::StatusOr<VfioTarget> VfioTargetOf(const Inventory& inventory, const VfioPlanning& planning,
                                        const std::string& name) {
  auto it = planning.devices.find(name);
  if (it == planning.devices.end()) {
    return absl::NotFoundError(absl::StrCat("no PCI facts for VFIO device ", name));
  }
  std::string root = planning.host_driver_root;
  if (root.empty() || root.back() != '/') root += '/';
  std::string node = root + "dev/nvidia-unknown";
  // The full GPU, or with DynamicMIG on a GPU announced without one, a MIG device's parent.
  if (const AllocatableDevice* gpu = NvidiaDeviceAt(inventory, it->second.bus_id)) {
    node = absl::StrCat(root, "dev/nvidia", gpu->gpu.minor);
  }
  return VfioTarget{.bus_id = it->second.bus_id,
                    .module = it->second.vfio_module,
                    .nvidia_device = std::move(node)};
}

}  // namespace dra::gpu
