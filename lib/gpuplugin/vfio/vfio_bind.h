#pragma once

// Handing a GPU from the nvidia driver to vfio-pci and back (gate PassthroughSupport,
// docs/vfio.md), as prepare steps (lib/prepare/plan.h) each with its Undo, so that a failure at any
// point leaves the GPU on nvidia with persistence mode on, and unprepare returns it there:
//
//   vfioModule       the GPU's vfio module loaded (<host>/sys/module/<m>, else `modprobe <m>`).
//                    Undo: nothing (the module stays; other GPUs may use it).
//   vfioPersistence  persistence mode off (the driver must let go of the GPU).
//                    Undo: persistence mode on.
//   vfioUnbind       the GPU must be on nvidia (or on its vfio driver already: a retry); wait,
//                    every free_interval up to free_timeout, until `fuser <nvidia device>` says no
//                    process holds it; refuse a PF with VFs; clear driver_override, write the bus
//                    id to drivers/nvidia/unbind.
//                    Undo: when unbound, clear driver_override and bind to nvidia.
//   vfioBind         driver_override = the vfio driver, write the bus id to
//                    drivers/<vfio driver>/bind; on failure clears driver_override again.
// After every write to a bind or unbind file the step waits (VfioHost::driver_timeout) until the
// GPU's driver link shows the result; a link that does not fails the step like a failed write.
//                    Undo: when on the vfio driver, unbind from it and clear driver_override.
//
// Each Apply changes nothing when it fails, or undoes its own part first, so every step is
// "not resumable": the engine then undoes the earlier steps in reverse. Each is recorded before
// it begins with its undo data {"busId", "module", "nvidiaDevice"}, so that the record alone
// undoes it after a crash. All sysfs writes go through SysfsWriter: the kernel's files in
// production, a fake with the kernel's semantics in tests (test/doubles/testing/fake_pci_sysfs.h).
//
// Thread-safety: the steps of one claim run on one thread (the device state's mutex).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/common/run_program.h"
#include "lib/gpuplugin/timeslicing/nvidia_smi.h"
#include "lib/prepare/plan.h"

namespace dra::gpu {

inline constexpr char kVfioModuleStep[] = "vfioModule";
inline constexpr char kVfioPersistenceStep[] = "vfioPersistence";
inline constexpr char kVfioUnbindStep[] = "vfioUnbind";
inline constexpr char kVfioBindStep[] = "vfioBind";

// Writes `value` to a sysfs control file in one write(2), as `echo -n value > path` does.
class SysfsWriter {
 public:
  virtual ~SysfsWriter() = default;
  // Errors keep the errno's code and name the file and the value.
  virtual absl::Status Write(const std::string& path, absl::string_view value) const = 0;
};
const SysfsWriter& KernelSysfsWriter();

// Runs a host program (argv[0] a name such as "modprobe") in the host's root.
using HostCommand =
    std::function<absl::StatusOr<ProgramResult>(const std::vector<std::string>& argv)>;
// Production: `chroot <host_root> <argv...>`, killed after `timeout`.
HostCommand ChrootCommand(std::string host_root, absl::Duration timeout = absl::Seconds(30));

// Persistence mode of a GPU by PCI bus id.
class GpuPersistence {
 public:
  virtual ~GpuPersistence() = default;
  virtual absl::Status Set(const std::string& bus_id, bool enabled) const = 0;
};
// Through nvidia-smi (`-i <bus id> -pm 0|1`). `smi` must outlive the result.
std::unique_ptr<GpuPersistence> SmiPersistence(const NvidiaSmi* smi);

struct VfioHost {
  std::string host_root;  // where the host's / is; sysfs under <host_root>/sys
  const SysfsWriter* sysfs = nullptr;
  HostCommand run;
  const GpuPersistence* persistence = nullptr;
  absl::Duration free_timeout = absl::Seconds(60);
  absl::Duration free_interval = absl::Seconds(1);
  // After each write to a driver's bind or unbind file, how long the driver link of the GPU may
  // take to show the result (polled every driver_interval) before the step fails. A kernel
  // answers bind/unbind writes synchronously, so there the first look finds it; this allows for
  // a driver that finishes its probe after the write returns, and a fake kernel that answers
  // from another process (test/doubles/fake-pci-kernel). docs/vfio.md, "Waiting for the driver".
  absl::Duration driver_timeout = absl::Seconds(2);
  absl::Duration driver_interval = absl::Milliseconds(10);
  std::function<void(absl::Duration)> sleep;  // null: absl::SleepFor
};

// One GPU to hand over.
struct VfioTarget {
  std::string bus_id;         // "0000:65:00.0"
  std::string module;         // "vfio_pci" or a variant from modules.alias
  std::string nvidia_device;  // host path fuser checks: "<host driver root>/dev/nvidia<minor>"
};

// The current driver of `bus_id` (basename of its driver link); empty when unbound.
std::string PciDriver(const std::string& host_root, const std::string& bus_id);

// The four steps above, in order. `host` must outlive them.
std::vector<std::unique_ptr<prepare::PlanStep>> VfioBindSteps(const VfioTarget& target,
                                                              const VfioHost* host);

// Their Undos, by step name, for prepare::StepUndoers. `host` must outlive the functions.
void AddVfioUndoers(const VfioHost* host, prepare::StepUndoers& undoers);

}  // namespace dra::gpu
