#include "lib/gpuplugin/prepare/driver.h"

#include "absl/strings/str_cat.h"
#include "lib/api/errors.h"
#include "lib/common/file_lock.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"

namespace dra::gpu {
namespace {

constexpr const char* kDeviceTypes[] = {"gpu", "mig", "vfio", "unknown"};

// Keeps the in-flight gauge and the duration histogram honest on every return path.
class RequestScope {
 public:
  RequestScope(DriverMetrics* m, const char* operation)
      : m_(m), operation_(operation), start_(absl::Now()) {}
  void Begin() {
    m_->requests_inflight->WithLabels({m_->driver, operation_})->Inc();
    begun_ = true;
  }
  void Succeeded() { ok_ = true; }
  ~RequestScope() {
    if (begun_) m_->requests_inflight->WithLabels({m_->driver, operation_})->Dec();
    if (!ok_) return;
    m_->requests_total->WithLabels({m_->driver, operation_})->Inc();
    m_->request_duration_seconds->WithLabels({m_->driver, operation_})
        ->Observe(absl::ToDoubleSeconds(absl::Now() - start_));
  }

 private:
  DriverMetrics* m_;
  const char* operation_;
  absl::Time start_;
  bool begun_ = false;
  bool ok_ = false;
};

// The public driver's wording of a claim's failure, which users' alerts and runbooks match in the
// pod's events: "error preparing devices for claim <namespace>/<name>:<uid>: <reason>".
absl::Status PrepareError(const k8s::ResourceClaim& claim, const absl::Status& s) {
  return Annotate(
      s, absl::StrCat("error preparing devices for claim ", claim.metadata.namespace_name, "/",
                      claim.metadata.name, ":", claim.metadata.uid));
}
// "error unpreparing devices for claim <namespace>/<name>:<uid>: <reason>", as the public driver.
absl::Status UnprepareError(const kubeletplugin::ClaimRef& claim, const absl::Status& s) {
  return Annotate(
      s, absl::StrCat("error unpreparing devices for claim ", claim.String(), ":", claim.uid));
}

}  // namespace

GpuDriver::GpuDriver(DeviceState* state, const std::string& plugin_data_dir, DriverMetrics* metrics,
                     absl::Duration lock_timeout)
    : state_(state),
      lock_path_(plugin_data_dir + "/pu.lock"),
      metrics_(metrics),
      lock_timeout_(lock_timeout) {
  for (const char* t : kDeviceTypes) {
    metrics_->prepared_devices->WithLabels({metrics_->node, metrics_->driver, t});
  }
  // The error types a failure is counted under (Prepare, Unprepare below), created at zero.
  for (const char* e : {"lock_acquire", "prepare_devices"}) {
    metrics_->prepare_errors_total->WithLabels({metrics_->driver, e});
  }
  for (const char* e : {"lock_acquire", "unprepare_devices"}) {
    metrics_->unprepare_errors_total->WithLabels({metrics_->driver, e});
  }
}

absl::Status GpuDriver::RunLocked(const std::function<absl::Status()>& fn) {
  auto lock = AcquireLock(Deadline(absl::InfiniteFuture(), "maintenance"));
  if (!lock.ok()) return lock.status();
  return fn();
}

void GpuDriver::RefreshPreparedDevicesGauge() {
  std::map<std::string, int> counts = state_->PreparedDeviceCounts();
  for (const char* t : kDeviceTypes) {
    metrics_->prepared_devices->WithLabels({metrics_->node, metrics_->driver, t})->Set(counts[t]);
  }
}

absl::StatusOr<FileLock> GpuDriver::AcquireLock(const Deadline& deadline) const {
  TraceStage stage("prepLock");
  const absl::Duration wait = deadline.infinite() ? lock_timeout_ : deadline.Left();
  auto lock = FileLock::Acquire(lock_path_, wait);
  if (!lock.ok()) {
    return Annotate(lock.status(),
                    absl::StrCat("error acquiring prep/unprep lock for ", deadline.what()));
  }
  return lock;
}

kubeletplugin::PrepareResult GpuDriver::PrepareOne(const k8s::ResourceClaim& claim,
                                                   absl::Time deadline_at) {
  RequestScope scope(metrics_, "prepare");
  const Deadline deadline(deadline_at, absl::StrCat("prepare of claim ", claim.metadata.uid));
  auto lock = AcquireLock(deadline);
  if (!lock.ok()) {
    metrics_->prepare_errors_total->WithLabels({metrics_->driver, "lock_acquire"})->Inc();
    absl::Status s = PrepareError(claim, lock.status());
    DRA_ERROR("prepare failed", "claim", claim.metadata.uid, "err", s);
    return {s, {}};
  }
  scope.Begin();
  auto devices = state_->Prepare(claim, deadline);
  if (!devices.ok()) {
    metrics_->prepare_errors_total->WithLabels({metrics_->driver, "prepare_devices"})->Inc();
    absl::Status s = devices.status();
    if (api::IsPermanentConfigError(s)) {
      // The kubelet shows this text in the pod's events; say that retrying will not help.
      s = Annotate(s, "permanent error (fix the claim or its device class)");
    }
    s = PrepareError(claim, s);
    DRA_ERROR("prepare failed", "claim", claim.metadata.uid, "err", s);
    return {s, {}};
  }
  RefreshPreparedDevicesGauge();
  kubeletplugin::PrepareResult result;
  for (const RecordedDevice& d : *devices) result.devices.push_back(d.kubelet);
  scope.Succeeded();
  return result;
}

absl::Status GpuDriver::UnprepareOne(const kubeletplugin::ClaimRef& claim, absl::Time deadline_at) {
  RequestScope scope(metrics_, "unprepare");
  const Deadline deadline(deadline_at, absl::StrCat("unprepare of claim ", claim.uid));
  auto lock = AcquireLock(deadline);
  if (!lock.ok()) {
    metrics_->unprepare_errors_total->WithLabels({metrics_->driver, "lock_acquire"})->Inc();
    absl::Status s = UnprepareError(claim, lock.status());
    DRA_ERROR("unprepare failed", "claim", claim.uid, "err", s);
    return s;
  }
  // Unprepare's steps are each safe to repeat, so they are not cut short; it is only not begun
  // once the kubelet has given up (its retry, or the cleanup, does it then).
  if (absl::Status s = deadline.Check("unprepare devices"); !s.ok()) {
    metrics_->unprepare_errors_total->WithLabels({metrics_->driver, "unprepare_devices"})->Inc();
    return UnprepareError(claim, s);
  }
  scope.Begin();
  absl::Status s = state_->Unprepare(claim.uid);
  if (!s.ok()) {
    metrics_->unprepare_errors_total->WithLabels({metrics_->driver, "unprepare_devices"})->Inc();
    s = UnprepareError(claim, s);
    DRA_ERROR("unprepare failed", "claim", claim.uid, "err", s);
    return s;
  }
  RefreshPreparedDevicesGauge();
  scope.Succeeded();
  return s;
}

absl::StatusOr<std::map<std::string, kubeletplugin::PrepareResult>>
GpuDriver::PrepareResourceClaims(const kubeletplugin::CallInfo& call,
                                 const std::vector<k8s::ResourceClaim>& claims) {
  std::map<std::string, kubeletplugin::PrepareResult> out;
  for (const k8s::ResourceClaim& claim : claims) {
    out[claim.metadata.uid] = PrepareOne(claim, call.deadline);
  }
  return out;
}

absl::StatusOr<std::map<std::string, absl::Status>> GpuDriver::UnprepareResourceClaims(
    const kubeletplugin::CallInfo& call, const std::vector<kubeletplugin::ClaimRef>& claims) {
  std::map<std::string, absl::Status> out;
  for (const kubeletplugin::ClaimRef& claim : claims) {
    out[claim.uid] = UnprepareOne(claim, call.deadline);
  }
  return out;
}

}  // namespace dra::gpu
