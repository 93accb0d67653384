#include "lib/cdplugin/cdi_specs.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/common/atomic_file.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/driverroot/cdi_edits.h"
#include "lib/driverroot/discovery.h"

namespace dra::cdplugin {

cdi::ContainerEdits ChannelEdits(int64_t major, int count) {
  cdi::ContainerEdits edits;
  edits.device_nodes.reserve(count);
  for (int n = 0; n < count; ++n) {
    edits.device_nodes.push_back({.path = absl::StrCat("/dev/nvidia-caps-imex-channels/channel", n),
                                  .type = "c",
                                  .major = major,
                                  .minor = n,
                                  .file_mode = 0666});
  }
  return edits;
}

cdi::ContainerEdits DaemonEdits(const DaemonEditsInput& in) {
  cdi::ContainerEdits edits;
  edits.env = {absl::StrCat("CLIQUE_ID=", in.clique_id),
               absl::StrCat("COMPUTE_DOMAIN_UUID=", in.domain_uid),
               absl::StrCat("COMPUTE_DOMAIN_NAME=", in.domain_name),
               absl::StrCat("COMPUTE_DOMAIN_NAMESPACE=", in.domain_namespace)};
  edits.mounts.push_back({.host_path = in.domain_dir,
                          .container_path = kImexdContainerPath,
                          .options = {"rw", "nosuid", "nodev", "bind"}});
  edits.mounts.push_back({.host_path = in.imex_host_path,
                          .container_path = "/usr/bin/nvidia-imex",
                          .options = driverroot::kReadOnlyMountOptions});
  edits.mounts.push_back({.host_path = in.imex_ctl_host_path,
                          .container_path = "/usr/bin/nvidia-imex-ctl",
                          .options = driverroot::kReadOnlyMountOptions});
  if (in.imex_mgmt_capability.has_value()) {
    const driverroot::DeviceNodeInfo& cap = *in.imex_mgmt_capability;
    edits.device_nodes.push_back({.path = cap.path,
                                  .type = "c",
                                  .major = cap.major,
                                  .minor = cap.minor,
                                  .file_mode = cap.mode});
  }
  return edits;
}

absl::StatusOr<driverroot::DeviceNodeInfo> ImexManagementCapability(
    const driverroot::DriverRoot& root) {
  const std::string path = root.proc_root() + "/driver/nvidia/capabilities/fabric-imex-mgmt";
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::StatusOr<driverroot::CapabilityFile> cap = driverroot::ParseCapabilityFile(text);
  if (!cap.ok()) return Annotate(cap.status(), path);
  absl::StatusOr<int64_t> major = driverroot::CharDeviceMajor(root, "nvidia-caps");
  if (!major.ok()) return Annotate(major.status(), "nvidia-caps major");
  return driverroot::DeviceNodeInfo{.path = absl::StrCat("/dev/nvidia-caps/nvidia-cap", cap->minor),
                                    .type = 'c',
                                    .major = *major,
                                    .minor = cap->minor,
                                    .mode = cap->mode};
}

absl::StatusOr<std::unique_ptr<CdiSpecs>> CdiSpecs::Create(const std::string& cdi_root) {
  ASSIGN_OR_RETURN(auto claims, cdi::TransientSpecDir::Create(cdi_root, kCdiClaimKind));
  ASSIGN_OR_RETURN(auto base, cdi::TransientSpecDir::Create(cdi_root, kCdiDeviceKind));
  return std::unique_ptr<CdiSpecs>(new CdiSpecs(std::move(claims), std::move(base)));
}

std::string CdiSpecs::BaseDeviceId() { return absl::StrCat(kCdiDeviceKind, "=", kBaseDeviceName); }

std::string CdiSpecs::ClaimDeviceId(const std::string& claim_uid, const std::string& device) {
  return absl::StrCat(kCdiClaimKind, "=", claim_uid, "-", device);
}

absl::StatusOr<std::string> CdiSpecs::WriteBaseSpec(const driverroot::DriverRoot& root) const {
  cdi::ContainerEdits edits;
  absl::StatusOr<driverroot::DriverFiles> files = driverroot::DiscoverDriverFiles(root);
  if (files.ok()) {
    // The daemon claim mounts the IMEX binaries itself (at fixed paths, also when the driver root
    // is elsewhere); two mounts on one target would only shadow each other.
    std::erase_if(files->binaries, [](const driverroot::DriverFile& f) {
      return f.container_path == "/usr/bin/nvidia-imex" ||
             f.container_path == "/usr/bin/nvidia-imex-ctl";
    });
    edits = driverroot::CommonEdits(*files);
  } else {
    return Annotate(files.status(), "discover the driver files for the base CDI spec");
  }
  edits.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  cdi::Spec spec;
  spec.kind = kCdiDeviceKind;
  spec.devices.push_back({.name = kBaseDeviceName, .container_edits = std::move(edits)});
  root.TransformSpec(spec);
  return base_->Write(kBaseSpecId, std::move(spec));
}

absl::StatusOr<std::map<std::string, std::string>> CdiSpecs::WriteClaimSpec(
    const std::string& claim_uid,
    const std::map<std::string, cdi::ContainerEdits>& device_edits) const {
  cdi::Spec spec;
  spec.kind = kCdiClaimKind;
  std::map<std::string, std::string> ids;
  for (const auto& [device, edits] : device_edits) {
    if (edits.empty()) continue;
    spec.devices.push_back(
        {.name = absl::StrCat(claim_uid, "-", device), .container_edits = edits});
    ids[device] = ClaimDeviceId(claim_uid, device);
  }
  if (spec.devices.empty()) {
    RETURN_IF_ERROR(RemoveClaimSpec(claim_uid));
    return ids;
  }
  absl::StatusOr<std::string> path = claims_->Write(claim_uid, std::move(spec));
  if (!path.ok())
    return Annotate(path.status(), absl::StrCat("write CDI spec of claim ", claim_uid));
  return ids;
}

absl::Status CdiSpecs::RemoveClaimSpec(const std::string& claim_uid) const {
  return Annotate(claims_->Remove(claim_uid), absl::StrCat("remove CDI spec of claim ", claim_uid));
}

absl::StatusOr<int> CdiSpecs::RemoveAllClaimSpecs() const {
  ASSIGN_OR_RETURN(std::vector<cdi::TransientSpecFile> files, claims_->List());
  std::set<std::string> removed;  // a claim may have a .json and a .yaml spec
  for (const cdi::TransientSpecFile& f : files) {
    if (removed.insert(f.id).second) RETURN_IF_ERROR(RemoveClaimSpec(f.id));
  }
  return static_cast<int>(removed.size());
}

std::function<absl::Status(const checkpoint::ClaimMap&)> RemoveClaimSpecsOnReboot(
    const CdiSpecs* specs) {
  return [specs](const checkpoint::ClaimMap& dropped) -> absl::Status {
    absl::StatusOr<int> removed = specs->RemoveAllClaimSpecs();
    if (!removed.ok()) {
      return Annotate(removed.status(), "remove the CDI specs written before the node rebooted");
    }
    DRA_INFO("removed the CDI specs written before the node rebooted", "specs", *removed,
             "droppedClaims", dropped.size());
    return absl::OkStatus();
  };
}

}  // namespace dra::cdplugin
