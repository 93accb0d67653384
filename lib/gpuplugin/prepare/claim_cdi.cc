#include "lib/gpuplugin/prepare/claim_cdi.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/cdi/names.h"
#include "lib/common/status.h"
#include "lib/driverroot/cdi_edits.h"
#include "lib/driverroot/device_nodes.h"
#include "lib/driverroot/discovery.h"

namespace dra::gpu {

absl::StatusOr<std::unique_ptr<ClaimCdi>> ClaimCdi::Create(const driverroot::DriverRoot* root,
                                                           std::string cdi_root,
                                                           const std::string& driver_version) {
  ASSIGN_OR_RETURN(driverroot::DriverFiles files,
                   driverroot::DiscoverDriverFiles(*root, driver_version));
  return CreateWithCommonEdits(root, std::move(cdi_root), driverroot::CommonEdits(files));
}

absl::StatusOr<std::unique_ptr<ClaimCdi>> ClaimCdi::CreateWithCommonEdits(
    const driverroot::DriverRoot* root, std::string cdi_root, cdi::ContainerEdits common) {
  ASSIGN_OR_RETURN(auto dir, cdi::TransientSpecDir::Create(std::move(cdi_root), kCdiKind));
  return std::unique_ptr<ClaimCdi>(new ClaimCdi(root, std::move(dir), std::move(common)));
}

std::string ClaimCdi::DeviceId(const std::string& claim_uid, const std::string& device) {
  return absl::StrCat(kCdiKind, "=", ClaimDeviceName(claim_uid, device));
}

absl::StatusOr<cdi::Spec> ClaimCdi::BuildSpec(
    const std::string& claim_uid, const std::vector<RecordedDevice>& devices,
    const std::map<std::string, cdi::ContainerEdits>& device_edits) const {
  cdi::Spec spec;
  spec.kind = kCdiKind;
  // A VFIO device gets the raw PCI device, no driver files (its edits come in `device_edits`,
  // vfio_claim.h); a claim of VFIO devices only has no spec-level edits.
  const bool vfio_only =
      !devices.empty() && std::all_of(devices.begin(), devices.end(), [](const RecordedDevice& d) {
        return d.type == DeviceType::kVfio;
      });
  if (!vfio_only) spec.container_edits = common_;
  for (const RecordedDevice& d : devices) {
    if (d.type == DeviceType::kVfio) {
      cdi::Device device;
      device.name = ClaimDeviceName(claim_uid, d.kubelet.device_name);
      spec.devices.push_back(std::move(device));
      continue;
    }
    auto gpu_nodes = driverroot::GpuDeviceNodes(*root_, d.minor, d.pci_bus_id);
    if (!gpu_nodes.ok()) {
      return Annotate(gpu_nodes.status(), absl::StrCat("device nodes of ", d.kubelet.device_name));
    }
    std::vector<driverroot::DeviceNodeInfo> nodes = std::move(*gpu_nodes);
    if (d.mig) {
      ASSIGN_OR_RETURN(auto caps, driverroot::MigCapabilityDeviceNodes(*root_, d.minor,
                                                                       d.mig->gi_id, d.mig->ci_id));
      nodes.insert(nodes.end(), caps.begin(), caps.end());
    }
    cdi::Device device;
    device.name = ClaimDeviceName(claim_uid, d.kubelet.device_name);
    device.container_edits = driverroot::DeviceNodeEdits(nodes);
    spec.devices.push_back(std::move(device));
  }
  root_->TransformSpec(spec);
  // After the transform: these host paths are not under the driver root.
  for (cdi::Device& device : spec.devices) {
    for (const auto& [name, edits] : device_edits) {
      if (device.name == ClaimDeviceName(claim_uid, name)) device.container_edits.Append(edits);
    }
  }
  return spec;
}

absl::StatusOr<std::string> ClaimCdi::Write(
    const std::string& claim_uid, const std::vector<RecordedDevice>& devices,
    const std::map<std::string, cdi::ContainerEdits>& device_edits) const {
  ASSIGN_OR_RETURN(cdi::Spec spec, BuildSpec(claim_uid, devices, device_edits));
  auto path = dir_->Write(claim_uid, std::move(spec));
  if (!path.ok())
    return Annotate(path.status(), absl::StrCat("write CDI spec for claim ", claim_uid));
  return path;
}

absl::Status ClaimCdi::Remove(const std::string& claim_uid) const {
  return Annotate(dir_->Remove(claim_uid), absl::StrCat("remove CDI spec of claim ", claim_uid));
}

absl::StatusOr<std::vector<std::string>> ClaimCdi::ListClaimUids() const {
  ASSIGN_OR_RETURN(auto files, dir_->List());
  std::vector<std::string> out;
  for (const cdi::TransientSpecFile& f : files) out.push_back(f.id);
  return out;
}

}  // namespace dra::gpu
