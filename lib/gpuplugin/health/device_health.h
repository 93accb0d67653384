#pragma once

// Device health from NVML events (docs/compatibility.md "Device health", feature gate
// NVMLDeviceHealthCheck).
//
// DeviceHealthTracker is the state: for every monitored device (full GPUs, static MIG devices and,
// with DynamicMIG, every MIG device prepare may create), its device taints and its health as the
// kubelet's DRAResourceHealth stream reports it.
//   XID event, XID not ignored   taint gpu.nvidia.com/xid=<xid>:NoSchedule   Unhealthy
//   XID event, XID ignored       taint gpu.nvidia.com/xid=<xid>:None         unchanged
//   GPU lost                     taint gpu.nvidia.com/gpu-lost:NoSchedule     Unhealthy
//   events not available         taint gpu.nvidia.com/unmonitored:None       Unknown
// One taint per key per device: a later XID replaces the earlier value.
//
// Recovery (docs/compatibility.md "Health recovery"): with a quiet period > 0, a device made
// Unhealthy by a critical XID or a lost GPU becomes a recovery candidate once no such event came
// for the quiet period; the monitor then re-checks it through NVML and, if the queries succeed,
// Recover() removes its xid and gpu-lost taints and reports it Healthy again. A quiet period of 0
// keeps the Go driver's behaviour: the state holds until the plugin restarts. Unmonitored devices
// never recover (nothing would notice a new fault).
//
// DeviceHealthMonitor is the event loop: one thread with its own NVML session, registering the
// XID and ECC events of every GPU that backs a device and feeding what it sees to the tracker.
// An event of a dynamic MIG device (created at prepare, so its instance ids are not known at
// startup) is matched by its GPU instance's profile and placement, read from NVML when the event
// comes. A GPU that Options::paused_gpus names (bound to vfio-pci for a passthrough claim) is not
// watched: its events and its recovery checks are skipped, a lost-GPU error marks only the other
// GPUs that fail a query, and once it leaves the set its events are registered again.
//
// Thread-safety: DeviceHealthTracker's methods may be called from any thread.
// DeviceHealthMonitor: Start/Stop from one thread; the callback runs on the monitor thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/common/clock.h"
#include "lib/gpuplugin/inventory/inventory.h"
#include "lib/k8s/objects_resource.h"
#include "lib/kubeletplugin/plugin_types.h"
#include "lib/nvml/nvml.h"

namespace dra::gpu {

inline constexpr char kTaintXid[] = "gpu.nvidia.com/xid";
inline constexpr char kTaintGpuLost[] = "gpu.nvidia.com/gpu-lost";
inline constexpr char kTaintUnmonitored[] = "gpu.nvidia.com/unmonitored";

// XIDs that only say an application misbehaved (13 graphics engine exception, 31 memory page
// fault, 43 channel stopped, 45 preemptive cleanup, 68 video processor exception, 109 context
// switch timeout): tainted with effect None, the GPU stays schedulable and healthy.
const std::set<uint64_t>& DefaultIgnoredXids();

// Parses --additional-xids-to-ignore: comma-separated unsigned integers; like the Go driver,
// entries that are not unsigned integers are skipped (each is logged as a warning).
std::set<uint64_t> ParseAdditionalIgnoredXids(const std::string& value);

class DeviceHealthTracker {
 public:
  // `devices`: the monitored device names (all others are ignored by the On* calls).
  // `recovery_quiet_period`: see above; <= 0 disables recovery.
  DeviceHealthTracker(std::string pool, std::vector<std::string> devices,
                      std::set<uint64_t> additional_ignored_xids,
                      absl::Duration recovery_quiet_period = absl::ZeroDuration());

  // Each returns true when the device's taints or health changed.
  bool OnXid(const std::string& device, uint64_t xid, absl::Time now);
  bool OnGpuLost(const std::vector<std::string>& devices, absl::Time now);
  bool OnUnmonitored(const std::vector<std::string>& devices, const std::string& reason,
                     absl::Time now);

  // Devices that are Unhealthy from a critical XID or a lost GPU and had no such event for the
  // quiet period by `now`, in name order; empty when recovery is disabled.
  std::vector<std::string> RecoveryDue(absl::Time now) const;
  // When RecoveryDue(`now`) still holds `device` (a new fault may have come since): removes its
  // xid and gpu-lost taints, reports it Healthy and returns how long it was Unhealthy.
  // Otherwise changes nothing and returns nullopt.
  std::optional<absl::Duration> Recover(const std::string& device, absl::Time now);

  // The taints of `device` (no time_added: the API server stamps it).
  std::vector<k8s::DeviceTaint> Taints(const std::string& device) const;
  // Adds the taints to the devices of `slice_devices` that have any.
  void ApplyTaints(std::vector<k8s::Device>& slice_devices) const;
  // Every monitored device, in name order.
  std::vector<kubeletplugin::DeviceHealth> HealthList() const;

 private:
  struct State {
    std::map<std::string, k8s::DeviceTaint> taints;  // key: taint key
    kubeletplugin::HealthStatus status = kubeletplugin::HealthStatus::kHealthy;
    std::string message;
    absl::Time updated;
    // Last critical XID or GPU-lost event; unset (InfinitePast) when there is nothing to recover.
    absl::Time last_fault = absl::InfinitePast();
    absl::Time unhealthy_since = absl::InfinitePast();
  };
  bool DueLocked(const State& s, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets `taint` on every known device of `devices` (one taint per key, the latest wins) and,
  // when `status` is set and not better than the device's health, that health with `message`.
  bool Mark(const std::vector<std::string>& devices, const k8s::DeviceTaint& taint,
            std::optional<kubeletplugin::HealthStatus> status, const std::string& message,
            absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string pool_;
  const std::set<uint64_t> ignored_xids_;
  const absl::Duration quiet_period_;
  mutable absl::Mutex mu_;
  std::map<std::string, State> devices_ ABSL_GUARDED_BY(mu_);
};

// Which device an NVML event belongs to: (GPU UUID, GPU instance id, compute instance id), with
// 0xffffffff for both ids on a full GPU.
using DevicePlacement = std::tuple<std::string, uint32_t, uint32_t>;
// Full GPUs and static MIG devices of `inventory` by placement (other types are not monitored).
std::map<DevicePlacement, std::string> DevicePlacements(const Inventory& inventory);
// A dynamic MIG device's place on its GPU: (GPU UUID, GPU instance profile id, placement start).
using DynamicMigPlacement = std::tuple<std::string, uint32_t, uint32_t>;
// The dynamic MIG devices of `inventory` (DynamicMIG) by that place.
std::map<DynamicMigPlacement, std::string> DynamicMigPlacements(const Inventory& inventory);
// The names of every device the health check watches: those of both maps above, in name order.
std::vector<std::string> MonitoredDevices(const Inventory& inventory);

class DeviceHealthMonitor {
 public:
  struct Options {
    absl::Duration wait_timeout = absl::Seconds(5);  // one nvmlEventSetWait
    // Event times and the recovery check (once per wait); must outlive the monitor.
    Clock* clock = RealClock::Get();
    // The recovery re-check of a device; empty: NVML queries on its GPU (by UUID: UUID, memory)
    // must succeed. Tests replace it.
    std::function<absl::Status(const std::string& device)> probe;
    // Called on the monitor thread for each recovered device, after the change is reported.
    std::function<void(const std::string& device, absl::Duration unhealthy_for)> on_recovered;
    // The UUIDs of the GPUs not to watch now (PassthroughSupport: bound to vfio-pci, or about to
    // be); asked at Start, before every wait and for every event. Empty: none.
    std::function<std::set<std::string>()> paused_gpus;
  };
  // Called after every change of the tracker's state.
  using OnChange = std::function<void()>;

  // Opens a session of `nvml` (which must outlive the monitor), registers events for every GPU
  // that backs a device of `inventory` and starts the loop. GPUs whose events cannot be
  // registered make their devices unmonitored (reported through the tracker, not as an error);
  // an error is returned only when no session or event set can be had at all.
  static absl::StatusOr<std::unique_ptr<DeviceHealthMonitor>> Start(const nvml::Nvml* nvml,
                                                                    const Inventory& inventory,
                                                                    DeviceHealthTracker* tracker,
                                                                    OnChange on_change,
                                                                    Options options);
  ~DeviceHealthMonitor();  // Stop()
  void Stop();

 private:
  DeviceHealthMonitor(nvml::Session session, nvml::EventSet events,
                      std::map<DevicePlacement, std::string> placements,
                      std::map<DynamicMigPlacement, std::string> dynamic,
                      std::map<std::string, std::vector<std::string>> devices_by_gpu,
                      DeviceHealthTracker* tracker, OnChange on_change, Options options);
  void Loop();
  // Re-checks the devices due for recovery and recovers those that pass.
  void CheckRecovery(const std::set<std::string>& paused);
  std::set<std::string> Paused() const;
  // Registers the events of the GPUs that left the paused set since the last call (on the monitor
  // thread); a GPU whose registration fails becomes unmonitored. True when the tracker changed.
  bool RegisterResumed(const std::set<std::string>& paused);
  // The device of an XID event: a static placement, else a dynamic MIG device found by its GPU
  // instance's profile and placement; empty when the event backs no published device.
  std::string DeviceOfEvent(const std::string& uuid, uint32_t gi, uint32_t ci) const;
  // The devices to mark lost: all without paused GPUs; with paused GPUs, those of the other GPUs
  // whose queries fail (the error may have come from a GPU leaving for vfio-pci).
  std::vector<std::string> LostDevices(const std::set<std::string>& paused) const;
  absl::Status Probe(const std::string& device) const;
  std::vector<std::string> AllDevices() const;

  nvml::Session session_;
  nvml::EventSet events_;
  const std::map<DevicePlacement, std::string> placements_;
  const std::map<DynamicMigPlacement, std::string> dynamic_;
  // Monitored GPUs only; a GPU paused at Start is here but not yet registered.
  const std::map<std::string, std::vector<std::string>> devices_by_gpu_;
  std::set<std::string> unregistered_;  // monitor thread only: GPUs whose events are not on
  std::set<std::string> last_paused_;   // monitor thread only: the paused set last seen
  DeviceHealthTracker* const tracker_;
  const OnChange on_change_;
  const Options options_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace dra::gpu
