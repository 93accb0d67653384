#pragma once

// VFIO passthrough in the plugin (gate PassthroughSupport, docs/vfio.md): the gpu-vfio-<idx>
// devices beside the GPUs in the inventory, the sibling rule of the ResourceSlice, and what a
// claim's prepare needs for its VFIO devices (the bind targets and their CDI edits).
//
// Siblings: a GPU is announced twice, as `gpu-<minor>` (on nvidia) and as `gpu-vfio-<idx>`; the
// two are the same hardware (the same PCI bus id). While a claim holds one of them, the other is
// left out of the published slice, and it is published again once no claim holds either.
//
// Thread-safety: stateless functions; VfioPlanning is immutable once built.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/api/types.h"
#include "lib/cdi/spec.h"
#include "lib/checkpoint/format.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/gpuplugin/vfio/vfio_bind.h"
#include "lib/gpuplugin/vfio/vfio_devices.h"
#include "lib/gpuplugin/vfio/vfio_pci.h"

namespace dra::gpu {

// What DeviceState needs to prepare VFIO devices.
struct VfioPlanning {
  const VfioHost* host = nullptr;         // sysfs writes, host programs, persistence mode
  std::map<std::string, PciGpu> devices;  // by device name "gpu-vfio-<idx>"
  std::string host_driver_root = "/";     // in the host root: <this>/dev/nvidia<minor> for fuser
  bool iommufd_available = false;         // <host root>/dev/iommu exists
};

// Adds the VFIO devices to `inventory` (kept sorted by name), except those whose GPU is announced
// through static MIG devices (the Go driver's vfioEnabled=false), and records each added one's
// PCI facts in `planning` (when not null). A VFIO device without an NVML GPU (already on
// vfio-pci) is added. DynamicMIG: the VFIO device of a GPU with a counter set consumes all of it,
// like the full GPU, so that the scheduler never allocates it beside one of the GPU's MIG
// devices (KEP-4815 shared counters).
void AddVfioDevices(Inventory& inventory, std::vector<VfioDevice> vfio, VfioPlanning* planning);

// The device of the other type with the same PCI bus id (gpu <-> vfio); empty when none.
std::string VfioSibling(const Inventory& inventory, const std::string& name);

// The names of the devices recorded by any claim of `claims`, in any state (a PrepareStarted VFIO
// claim may have unbound its GPU already). Unreadable records are skipped.
std::set<std::string> RecordedDeviceNames(const checkpoint::ClaimMap& claims);

// The NVML UUIDs of the GPUs whose VFIO devices are in `held` (bound to vfio-pci, or about to
// be, or not yet back on nvidia): the device health check does not watch them. A GPU is found by
// its PCI bus id among the full GPU and MIG devices; one without an NVML GPU has no UUID.
std::set<std::string> VfioHeldGpus(const Inventory& inventory, const std::set<std::string>& held);

// `inventory` without the siblings of the devices in `held`: what the slice announces.
Inventory WithoutHeldSiblings(const Inventory& inventory, const std::set<std::string>& held);

// FailedPrecondition when the sibling of one of `devices` is held by another claim of `claims`
// than `claim_uid` (the slice had left it out, the allocation is stale). With DynamicMIG a GPU's
// VFIO device and its dynamic MIG devices count as siblings too.
absl::Status CheckSiblingsFree(const Inventory& inventory, const std::string& claim_uid,
                               const std::vector<std::string>& devices,
                               const checkpoint::ClaimMap& claims);

// The CDI edits of a prepared VFIO device (host paths = container paths, the host's /dev):
// /dev/vfio/<group>, or /dev/vfio/devices/<vfioN> with policy PreferIommuFD when the host has
// iommufd (FailedPrecondition "missing iommufd cdev for GPU <bdf>" without its cdev); with
// enableAPIDevice, /dev/iommu (iommufd in use) or /dev/vfio/vfio; and NVIDIA_VISIBLE_DEVICES=void
// (no driver files: the container gets the raw device). `iommu` is normalized. A GPU without an
// IOMMU group: FailedPrecondition.
absl::StatusOr<cdi::ContainerEdits> VfioCdiEdits(const PciGpu& gpu, const api::IommuConfig& iommu,
                                                 bool iommufd_available);

// One VFIO device of a claim, for its CDI edits.
struct VfioCdiRequest {
  std::string device;      // "gpu-vfio-<idx>"
  PciGpu pci;              // as discovered (its iommufd cdev appears only once on vfio)
  api::IommuConfig iommu;  // normalized
  std::string host_root;   // where vfio-dev/ is read after the bind
  bool iommufd_available = false;
};

// The step `vfioCdiEdits`, after the bind steps: re-reads each device's iommufd cdev from sysfs
// (it exists only once the GPU is on vfio), and adds VfioCdiEdits to `*edits` (the plan's
// ClaimStepContext, claim_steps.h; it must outlive the step) under the device's name, for the
// cdiSpec step. Plugin-internal (nothing to undo), not resumable.
inline constexpr char kVfioCdiEditsStep[] = "vfioCdiEdits";
std::unique_ptr<prepare::PlanStep> VfioCdiEditsStep(
    std::vector<VfioCdiRequest> requests, std::map<std::string, cdi::ContainerEdits>* edits);

// The bind target of VFIO device `name` for prepare: its bus id, vfio module, and the nvidia
// device node of its GPU (the minor of the GPU at its bus id, announced as a full GPU or through
// its dynamic MIG devices; /dev/nvidia-unknown without an NVML GPU, which
// only matters for a GPU not on nvidia, where the unbind step has nothing to wait for).
absl::StatusOr<VfioTarget> VfioTargetOf(const Inventory& inventory, const VfioPlanning& planning,
                                        const std::string& name);

}  // namespace dra::gpu
