#pragma once

// Character device nodes of the NVIDIA driver: the control nodes every GPU container needs, the
// per-GPU node and its DRM nodes, and the MIG capability nodes (nvidia-caps) whose numbers come
// from /proc rather than from a node on disk.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/driverroot/driver_root.h"

namespace dra::driverroot {

// The control nodes, in the order they are injected.
extern const std::vector<std::string> kControlDeviceNodes;  // /dev/nvidiactl, /dev/nvidia-uvm, ...

struct DeviceNodeInfo {
  std::string path;       // inside the container, e.g. "/dev/nvidiactl"
  std::string host_path;  // where the plugin found it ("<dev root>/dev/nvidiactl"); empty when
                          // the node is described only by its numbers (MIG capabilities)
  char type = 'c';
  int64_t major = 0;
  int64_t minor = 0;
  uint32_t mode = 0;  // permission bits (st_mode & 07777)
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;

  friend bool operator==(const DeviceNodeInfo&, const DeviceNodeInfo&) = default;
};

// stat(2)s "<dev root><path>" (following links). NotFound when it is missing; FailedPrecondition
// when it is not a character or block device (e.g. an empty file in a mock root without mknod).
absl::StatusOr<DeviceNodeInfo> StatDeviceNode(const DriverRoot& root, absl::string_view path);

// The control nodes that exist under the dev root. Missing nodes are skipped (nvidia-uvm and
// nvidia-modeset appear only once their modules are loaded); a path that exists but is not a
// device node is skipped with a warning. Other errors are returned.
absl::StatusOr<std::vector<DeviceNodeInfo>> ControlDeviceNodes(const DriverRoot& root);

// The nodes of one full GPU: "/dev/nvidia<minor>" (required) and, when `pci_bus_id` is not empty,
// "/dev/dri/<name>" for each card*/renderD* entry of "<sys root>/bus/pci/devices/<bdf>/drm/"
// whose node exists (sorted by name). `pci_bus_id` may be NVML's form "00000000:65:00.0" or
// sysfs's "0000:65:00.0".
absl::StatusOr<std::vector<DeviceNodeInfo>> GpuDeviceNodes(const DriverRoot& root,
                                                           unsigned gpu_minor,
                                                           absl::string_view pci_bus_id);

// A parsed ".../mig/gi<N>/access" or ".../ci<M>/access" capability file.
struct CapabilityFile {
  int64_t minor = 0;  // "DeviceFileMinor: <n>"
  uint32_t mode = 0;  // "DeviceFileMode: <n>" (decimal)
};
absl::StatusOr<CapabilityFile> ParseCapabilityFile(absl::string_view text);

// The major number of character device `name` in "<proc root>/devices" ("Character devices:"
// section only). NotFound when it is not listed.
absl::StatusOr<int64_t> CharDeviceMajor(const DriverRoot& root, absl::string_view name);

// The two capability nodes that grant access to one MIG device:
//   GI: "<proc root>/driver/nvidia/capabilities/gpu<minor>/mig/gi<gi>/access"
//   CI: "<proc root>/driver/nvidia/capabilities/gpu<minor>/mig/gi<gi>/ci<ci>/access"
// each as {path "/dev/nvidia-caps/nvidia-cap<DeviceFileMinor>", type c, major of "nvidia-caps",
// minor, mode DeviceFileMode}, without host path: the runtime creates them from the numbers.
absl::StatusOr<std::vector<DeviceNodeInfo>> MigCapabilityDeviceNodes(const DriverRoot& root,
                                                                     unsigned gpu_minor,
                                                                     unsigned gi, unsigned ci);

}  // namespace dra::driverroot
