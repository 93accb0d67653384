#pragma once

// PCI addresses, and PCI topology facts read from sysfs for the standard device attributes
// resource.kubernetes.io/pcieRoot and resource.kubernetes.io/numaNode (docs/api-facts.md
// "Standard attributes").
//
// `sysfs_root` is "/sys" in production and a temporary tree in tests; `pci_bus_id` is the
// normalized address ("0000:65:00.0"), the name of the entry under <sysfs_root>/bus/pci/devices.
//
// Thread-safety: stateless functions; safe from any thread.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace dra::gpu {

// NVML's bus id ("00000000:65:00.0", any case) as the standard attribute wants it:
// lower case with a 4-digit domain ("0000:65:00.0"). InvalidArgument when the result does not
// match ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$.
absl::StatusOr<std::string> NormalizePciBusId(std::string_view nvml_bus_id);

// The PCIe root complex of a PCI function: the first path element after <sysfs_root>/devices/ in
// the (resolved) target of the <sysfs_root>/bus/pci/devices/<pci_bus_id> symlink, e.g.
// "pci0000:64" for "../../../devices/pci0000:64/0000:64:00.0/0000:65:00.0". It must look like
// "pci<4 hex>:<2 hex>". Errors name the path and what was wrong with it.
absl::StatusOr<std::string> ReadPcieRoot(std::string_view sysfs_root, std::string_view pci_bus_id);

// The NUMA node of a PCI function from <sysfs_root>/bus/pci/devices/<pci_bus_id>/numa_node:
// nullopt when the file does not exist or holds a negative number (-1: no NUMA affinity); an error
// when it cannot be read or is not an integer.
absl::StatusOr<std::optional<int>> ReadNumaNode(std::string_view sysfs_root,
                                                std::string_view pci_bus_id);

}  // namespace dra::gpu
