#pragma once

// GpuDriver: the gpu.nvidia.com DraDriver served to the kubelet. Each claim is prepared or
// unprepared under the node-wide flock "<plugin data dir>/pu.lock" (so that two plugin instances
// during an upgrade never work on devices at once) and counted in the driver's metrics.
//
// The kubelet's deadline (CallInfo::deadline) bounds each claim's work: the wait for pu.lock lasts
// until the deadline (the fixed lock timeout only for calls without one, such as the cleanup's),
// and each step of a prepare waits at most the time left and is not begun once it has passed
// (DeviceState::Prepare). A claim cut short fails with DeadlineExceeded naming the claim and the
// step, leaving what a failure of that step leaves (docs/prepare-flow.md "Deadlines").
//
// Thread-safety: the methods may be called concurrently from any thread.

#include <functional>
#include <memory>
#include <string>

#include "lib/common/deadline.h"
#include "lib/common/file_lock.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/kubeletplugin/driver.h"
#include "lib/kubeletplugin/driver_metrics.h"

namespace dra::gpu {

using kubeletplugin::DriverMetrics;

class GpuDriver : public kubeletplugin::DraDriver {
 public:
  // `state` and `metrics` must outlive the driver.
  // `lock_timeout` bounds the wait for pu.lock of calls without a deadline.
  GpuDriver(DeviceState* state, const std::string& plugin_data_dir, DriverMetrics* metrics,
            absl::Duration lock_timeout = absl::Seconds(10));

  absl::StatusOr<std::map<std::string, kubeletplugin::PrepareResult>> PrepareResourceClaims(
      const kubeletplugin::CallInfo& call, const std::vector<k8s::ResourceClaim>& claims) override;
  absl::StatusOr<std::map<std::string, absl::Status>> UnprepareResourceClaims(
      const kubeletplugin::CallInfo& call,
      const std::vector<kubeletplugin::ClaimRef>& claims) override;

  // Runs `fn` holding the prep/unprep lock (for maintenance that must not interleave with a
  // prepare, such as removing CDI specs of claims not in the checkpoint).
  absl::Status RunLocked(const std::function<absl::Status()>& fn);

  // Sets nvidia_dra_prepared_devices from the device state's counts.
  void RefreshPreparedDevicesGauge();

 private:
  kubeletplugin::PrepareResult PrepareOne(const k8s::ResourceClaim& claim, absl::Time deadline);
  absl::Status UnprepareOne(const kubeletplugin::ClaimRef& claim, absl::Time deadline);
  // Takes pu.lock for `deadline`'s operation: waiting until its deadline, or lock_timeout_ when it
  // has none. Errors start with "error acquiring prep/unprep lock for <operation>".
  absl::StatusOr<FileLock> AcquireLock(const Deadline& deadline) const;

  DeviceState* const state_;
  const std::string lock_path_;
  DriverMetrics* const metrics_;
  const absl::Duration lock_timeout_;
};

}  // namespace dra::gpu
