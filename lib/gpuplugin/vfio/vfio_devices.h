#pragma once

// The VFIO devices a node announces with gate PassthroughSupport (docs/vfio.md "Devices"):
// `gpu-vfio-<idx>`, idx being the GPU's position in DiscoverPciGpus (PCI address order), with
//   type="vfio", uuid (UUIDv5 of the PCI address in the DNS namespace: stable per address),
//   deviceID, vendorID ("0x%04x"), productName (pci.ids, when found), iommuFDEnabled (bool),
//   resource.kubernetes.io/pciBusID, resource.kubernetes.io/pcieRoot, resource.kubernetes.io/
//   numaNode (when known);
//   capacity addressableMemory: the sum of the 64-bit memory BARs among the first six of sysfs
//   `resource`, rounded up to a power of two.
//
// Thread-safety: stateless functions.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/vfio/vfio_pci.h"

namespace dra::gpu {

// A VFIO device and the PCI facts its prepare needs.
struct VfioDevice {
  AllocatableDevice device;  // type kVfio; gpu.pci_bus_id, gpu.numa_node, gpu.pcie_root set
  PciGpu pci;
};

// "gpu-vfio-<idx>".
std::string VfioDeviceName(size_t index);

// RFC 4122 version 5 UUID of `name` in the DNS namespace, lower-case hex with dashes.
std::string Uuid5Dns(absl::string_view name);

// The 64-bit memory BARs (flags bit 0x4 set) among the first six lines "start end flags" of a
// sysfs `resource` file, summed and rounded up to a power of two; 0 when there are none.
uint64_t AddressableMemory(absl::string_view resource_text);

// The device name from a pci.ids database text: the line "\t<device>  <name>" under the vendor
// line "<vendor>  <name>" (ids without "0x", lower case). Empty when absent.
std::string PciIdsDeviceName(absl::string_view pci_ids, absl::string_view vendor_id,
                             absl::string_view device_id);

// The devices for `gpus`, read from `host_root` (pci.ids under usr/share/misc, usr/local/share,
// usr/share/hwdata, usr/share; the `resource` file and the PCIe root under sys/). Errors name the
// GPU and the file.
absl::StatusOr<std::vector<VfioDevice>> VfioDevices(const std::vector<PciGpu>& gpus,
                                                    const std::string& host_root);

}  // namespace dra::gpu
