#pragma once

// The plugin's VFIO side at startup (gate PassthroughSupport, docs/vfio.md "In the plugin"): checks
// that the host root is mounted and that the host has IOMMU groups, discovers the host's PCI GPUs
// and adds their gpu-vfio-<idx> devices to the inventory, and holds what the bind steps act
// through (the kernel's sysfs files, chroot into the host root, persistence mode through
// nvidia-smi).
//
// Thread-safety: immutable once SetPersistence was called (before the device state uses it).

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/timeslicing/nvidia_smi.h"
#include "lib/gpuplugin/vfio/vfio_bind.h"
#include "lib/gpuplugin/vfio/vfio_claim.h"

namespace dra::gpu {

class VfioRuntime {
 public:
  // `host_root`: --host-root (the host's / as mounted in the plugin's container).
  // `host_driver_root`: --nvidia-driver-root (where the host's /dev/nvidia<minor> is, for fuser).
  // Errors: "host root is not mounted at \"<dir>\"" and "IOMMU is not enabled in the kernel
  // (<host root>/sys/kernel/iommu_groups is missing or empty)", as the Go driver refuses to start;
  // unreadable sysfs files of a GPU. `kernel_release` empty: uname(2)'s (the host's kernel, also
  // in a container).
  static absl::StatusOr<std::unique_ptr<VfioRuntime>> Create(const std::string& host_root,
                                                             const std::string& host_driver_root,
                                                             Inventory& inventory,
                                                             std::string kernel_release = "");

  // Persistence mode through `smi` (must outlive this object).
  void SetPersistence(const NvidiaSmi* smi);

  const VfioPlanning& planning() const { return planning_; }

 private:
  VfioRuntime() = default;
  VfioHost host_;
  std::unique_ptr<GpuPersistence> persistence_;
  VfioPlanning planning_;
};

}  // namespace dra::gpu
