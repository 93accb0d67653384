#pragma once

// The host's PCI view of NVIDIA GPUs for VFIO passthrough (gate PassthroughSupport,
// docs/vfio.md): discovery from sysfs and the choice of the vfio driver module.
//
// `host_root` is where the host's / is visible ("/" on the host, the mounted host root in the
// plugin's container, a temporary tree in tests). Read per PCI function under
// <host_root>/sys/bus/pci/devices/<bdf>/: vendor, class, device, numa_node, the driver and
// iommu_group links, vfio-dev/vfio* (the iommufd cdev), sriov_numvfs, sriov_totalvfs, physfn
// (a VF), modalias. A GPU is vendor 0x10de with class 0x030000 (VGA) or 0x030200 (3D); virtual
// functions are not GPUs here.
//
// Thread-safety: stateless functions.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::gpu {

inline constexpr char kNvidiaPciVendor[] = "0x10de";
// The module used when modules.alias has no better match; its driver is "vfio-pci".
inline constexpr char kDefaultVfioModule[] = "vfio_pci";

struct PciGpu {
  std::string bus_id;        // "0000:65:00.0"
  std::string device_id;     // "0x2330"
  std::string pci_class;     // "0x030200"
  std::string driver;        // basename of the driver link; empty when unbound
  int iommu_group = -1;      // -1: no iommu_group link
  std::string iommufd_cdev;  // "vfio3" (from vfio-dev/), empty when none
  std::optional<int> numa_node;
  int sriov_numvfs = 0;
  int sriov_totalvfs = 0;
  std::string modalias;
  std::string vfio_module;  // BestVfioModule for modalias
};

// Every NVIDIA GPU (not VF) under <host_root>/sys/bus/pci/devices, sorted by bus id, with its
// vfio module from <host_root>/lib/modules/<kernel_release>/modules.alias (a missing file:
// kDefaultVfioModule). A missing devices directory is an empty list; an unreadable attribute of a
// GPU is an error naming the file.
absl::StatusOr<std::vector<PciGpu>> DiscoverPciGpus(const std::string& host_root,
                                                    const std::string& kernel_release);

// The module of the `alias vfio_pci:<pattern> <module>` line of `modules_alias` whose pattern
// (shell glob: '*', '?') matches `modalias` (the sysfs file's "pci:v...", its "pci:" prefix
// dropped) with the fewest '*'; the first such line on a tie;
// kDefaultVfioModule when none matches.
std::string BestVfioModule(absl::string_view modules_alias, absl::string_view modalias);

// Shell-style match of `text` against `pattern` ('*' any run, '?' one character).
bool GlobMatch(absl::string_view pattern, absl::string_view text);

// The sysfs driver directory name of a module: "vfio_pci" -> "vfio-pci" ('_' -> '-').
std::string VfioDriverName(absl::string_view module);

// Whether the host has IOMMU groups: <host_root>/sys/kernel/iommu_groups exists and is not empty.
bool IommuEnabled(const std::string& host_root);
// Whether the host offers iommufd: <host_root>/dev/iommu exists.
bool IommufdAvailable(const std::string& host_root);

}  // namespace dra::gpu
