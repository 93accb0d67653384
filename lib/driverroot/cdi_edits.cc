#include "lib/driverroot/cdi_edits.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace dra::driverroot {

const std::vector<std::string> kReadOnlyMountOptions = {"ro", "nosuid", "nodev", "rbind",
                                                        "rprivate"};
const std::vector<std::string> kIpcMountOptions = {"nosuid", "nodev", "rbind", "rprivate",
                                                   "noexec"};

cdi::DeviceNode ToCdiDeviceNode(const DeviceNodeInfo& node) {
  cdi::DeviceNode out;
  out.path = node.path;
  if (!node.host_path.empty() && node.host_path != node.path) out.host_path = node.host_path;
  out.type = std::string(1, node.type);
  out.major = node.major;
  out.minor = node.minor;
  out.file_mode = node.mode;
  out.permissions = "rwm";
  out.uid = node.uid;
  out.gid = node.gid;
  return out;
}

cdi::ContainerEdits DeviceNodeEdits(const std::vector<DeviceNodeInfo>& nodes) {
  cdi::ContainerEdits edits;
  for (const DeviceNodeInfo& node : nodes) edits.device_nodes.push_back(ToCdiDeviceNode(node));
  return edits;
}

cdi::ContainerEdits CommonEdits(const DriverFiles& files) {
  cdi::ContainerEdits edits = DeviceNodeEdits(files.control_devices);
  if (!files.libcuda_dir.empty()) {
    edits.env.push_back(absl::StrCat("NVIDIA_CTK_LIBCUDA_DIR=", files.libcuda_dir));
  }
  for (const auto* group : {&files.libraries, &files.firmware, &files.binaries}) {
    for (const DriverFile& f : *group) {
      edits.mounts.push_back({.host_path = f.path,
                              .container_path = f.container_path,
                              .options = kReadOnlyMountOptions});
    }
  }
  for (const DriverFile& f : files.ipc) {
    edits.mounts.push_back(
        {.host_path = f.path, .container_path = f.container_path, .options = kIpcMountOptions});
  }
  std::set<uint32_t> gids;
  for (const DeviceNodeInfo& node : files.control_devices) {
    if (node.gid && *node.gid != 0 && (node.mode & 0006) != 0006) gids.insert(*node.gid);
  }
  edits.additional_gids.assign(gids.begin(), gids.end());
  return edits;
}

}  // namespace dra::driverroot
