#pragma once

// A fake host for VFIO passthrough tests (lib/gpuplugin/vfio/vfio_pci.h, vfio_bind.h): a host root
// tree with NVIDIA GPUs under sys/bus/pci/devices, the nvidia driver bound, IOMMU groups,
// modules.alias, and fake `modprobe` and `fuser` programs in usr/sbin; plus a SysfsWriter whose
// driver_override, bind and unbind files behave like the kernel's:
//
//   devices/<bdf>/driver_override  "\n" clears it; anything else names the only driver that may
//                                  bind the device.
//   drivers/<d>/unbind <bdf>       ENODEV unless the device is bound to <d>; removes the driver
//                                  link (and, for vfio-pci, the group's /dev/vfio/<group> node and
//                                  vfio-dev/vfio<group>).
//   drivers/<d>/bind <bdf>         ENOENT for a driver that is not registered (directory absent:
//                                  the module is not loaded), EBUSY when the device has a driver,
//                                  ENODEV when driver_override names another driver; else links
//                                  the driver (vfio-pci also creates dev/vfio/<group> and
//                                  vfio-dev/vfio<group>).
//
// Failures are injected per file: FailWrites("drivers/vfio-pci/bind", EIO) makes every write to
// a path ending so fail. The fake modprobe registers the driver of the module it loads
// (sys/module/<m>, sys/bus/pci/drivers/<m with '-'>) and fails when <root>/modprobe-fails exists;
// the fake fuser exits 1 (free) unless <root>/fuser-holders exists (its contents are printed,
// exit 0).
//
// Thread-safety: none (tests).

#include <map>
#include <string>
#include <vector>

#include "lib/gpuplugin/vfio/vfio_bind.h"

namespace dra::testing {

struct FakePciGpu {
  std::string bus_id;  // "0000:65:00.0"
  int iommu_group = 0;
  std::string pci_class = "0x030200";
  std::string device_id = "0x2330";
  std::string modalias = "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00";
  int numa_node = 0;
  int sriov_numvfs = 0;
  std::string driver = "nvidia";  // empty: unbound
};

// Builds the tree under `root` (created). `modules_alias` goes to
// lib/modules/<kernel_release>/modules.alias.
absl::Status MakeFakePciHost(const std::string& root, const std::vector<FakePciGpu>& gpus,
                             const std::string& kernel_release = "6.8.0-test",
                             const std::string& modules_alias = "");

class FakeKernelSysfs final : public gpu::SysfsWriter {
 public:
  explicit FakeKernelSysfs(std::string root) : root_(std::move(root)) {}
  absl::Status Write(const std::string& path, absl::string_view value) const override;
  void FailWrites(const std::string& path_suffix, int err) { failures_[path_suffix] = err; }
  void ClearFailures() { failures_.clear(); }
  // vfio-pci binds create dev/vfio/<group> as a character device 1:3 (the numbers of /dev/null)
  // instead of an empty file, so that a container runtime can inject it (needs CAP_MKNOD).
  void MakeCharDevices(bool on) { char_devices_ = on; }
  // Every write as "<path relative to root>=<value>" (value without its newline).
  mutable std::vector<std::string> writes;

 private:
  absl::Status WriteUnchecked(const std::string& rel, const std::string& value) const;
  const std::string root_;
  std::map<std::string, int> failures_;
  bool char_devices_ = false;
};

// Runs <root>/usr/sbin/<argv[0]> with the rest of argv and HOST_ROOT=<root>: the fake programs
// above, standing in for `chroot <root> <argv...>`.
gpu::HostCommand FakeHostCommand(std::string root);

}  // namespace dra::testing
