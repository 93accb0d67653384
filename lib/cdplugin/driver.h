#pragma once

// CdDriver: the compute-domain.nvidia.com DraDriver served to the kubelet (with
// PluginServerOptions::serialize = false: a channel claim's prepare waits for the daemon claim
// of the same node, which the kubelet prepares in another call, so calls must overlap).
//
// Retry semantics (docs/compute-domains.md "Retries"): each claim of a call is attempted; a
// retryable error (errors.h) is retried with per-claim exponential backoff (250 ms doubling to
// 3 s, jittered) until the kubelet's deadline is `deadline_margin` away (45 s after the call
// when the kubelet set none), and then returned as the claim's error, so the kubelet reports the
// failure (event FailedPrepareDynamicResources), keeps the pod in ContainerCreating and calls
// again later. Permanent errors are returned at once, with "permanent error" in the text. The
// claims of one call are retried side by side, none waits for another.
//
// Unprepare retries its (API) errors the same way.
//
// Metrics (docs/compute-domains.md "Metrics"): nvidia_dra_requests_total,
// nvidia_dra_request_duration_seconds and nvidia_dra_requests_inflight per claim operation,
// nvidia_dra_node_prepare_errors_total / nvidia_dra_node_unprepare_errors_total
// {error_type="prepare_devices"|"unprepare_devices"} per failed claim, and
// nvidia_dra_prepared_devices{device_type="channel"|"daemon"} after each change.
//
// Thread-safety: the methods may be called concurrently from any threads.

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/cdplugin/device_state.h"
#include "lib/common/backoff.h"
#include "lib/common/clock.h"
#include "lib/kubeletplugin/driver.h"
#include "lib/kubeletplugin/driver_metrics.h"

namespace dra::cdplugin {

struct CdDriverOptions {
  absl::Duration window_without_deadline = absl::Seconds(45);
  absl::Duration deadline_margin = absl::Seconds(2);
  BackoffOptions backoff = {
      .initial = absl::Milliseconds(250), .max = absl::Seconds(3), .factor = 2.0, .jitter = 0.1};
  Clock* clock = nullptr;  // RealClock when null
};

class CdDriver : public kubeletplugin::DraDriver {
 public:
  // `state` and `metrics` must outlive the driver.
  CdDriver(DeviceState* state, kubeletplugin::DriverMetrics* metrics, CdDriverOptions options = {});

  absl::StatusOr<std::map<std::string, kubeletplugin::PrepareResult>> PrepareResourceClaims(
      const kubeletplugin::CallInfo& call, const std::vector<k8s::ResourceClaim>& claims) override;
  absl::StatusOr<std::map<std::string, absl::Status>> UnprepareResourceClaims(
      const kubeletplugin::CallInfo& call,
      const std::vector<kubeletplugin::ClaimRef>& claims) override;

  // Sets nvidia_dra_prepared_devices from the checkpoint.
  void RefreshPreparedDevicesGauge();

  // Ends every retry loop within 100 ms, returning each unfinished claim's last error (the
  // process is stopping; the kubelet retries with the next instance). Call before stopping the
  // server, which waits for running calls.
  void Shutdown() { shutting_down_ = true; }

 private:
  // Runs attempt(i) for i in [0, n) until each succeeds or fails permanently, or `end` comes;
  // returns the last status of each.
  std::vector<absl::Status> RetryAll(size_t n, absl::Time end,
                                     const std::function<absl::Status(size_t)>& attempt);
  absl::Time EndOf(const kubeletplugin::CallInfo& call) const;

  DeviceState* const state_;
  kubeletplugin::DriverMetrics* const metrics_;
  const CdDriverOptions options_;
  Clock* const clock_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace dra::cdplugin
