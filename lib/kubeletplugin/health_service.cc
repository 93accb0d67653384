#include "lib/kubeletplugin/health_service.h"

#include <utility>

#include "lib/common/log.h"

namespace dra::kubeletplugin {
namespace {

// How often a stream waiting for news checks whether the kubelet went away.
constexpr absl::Duration kCancelPollInterval = absl::Milliseconds(500);
// How often a stream sends the current list again without news. The kubelet (v1.36) clears the
// health of all of a driver's devices when any stream of that driver ends: in a surge rollout the
// old instance's stream ends after the new one sent its list, and the resend restores it.
constexpr absl::Duration kResendInterval = absl::Seconds(5);

::v1alpha1::HealthStatus ToProto(HealthStatus status) {
  switch (status) {
    case HealthStatus::kHealthy:
      return ::v1alpha1::HEALTHY;
    case HealthStatus::kUnhealthy:
      return ::v1alpha1::UNHEALTHY;
    case HealthStatus::kUnknown:
      break;
  }
  return ::v1alpha1::UNKNOWN;
}

::v1alpha1::NodeWatchResourcesResponse ToProto(const std::vector<DeviceHealth>& devices) {
  ::v1alpha1::NodeWatchResourcesResponse response;
  for (const DeviceHealth& device : devices) {
    ::v1alpha1::DeviceHealth* pb = response.add_devices();
    pb->mutable_device()->set_pool_name(device.pool_name);
    pb->mutable_device()->set_device_name(device.device_name);
    pb->set_health(ToProto(device.status));
    pb->set_last_updated_time(absl::ToUnixSeconds(device.last_updated));
    pb->set_health_check_timeout_seconds(absl::ToInt64Seconds(device.check_timeout));
    pb->set_message(device.message);
  }
  return response;
}

}  // namespace

void HealthService::Publish(std::vector<DeviceHealth> devices) {
  absl::MutexLock lock(&mu_);
  devices_ = std::move(devices);
  ++version_;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

grpc::Status HealthService::NodeWatchResources(
    grpc::ServerContext* context, const ::v1alpha1::NodeWatchResourcesRequest*,
    grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>* writer) {
  DRA_VLOG(2, "kubelet opened health stream", "peer", context->peer());
  uint64_t sent = 0;
  absl::Time last_write = absl::Now();
  while (true) {
    ::v1alpha1::NodeWatchResourcesResponse response;
    {
      absl::MutexLock lock(&mu_);
      auto news = [&]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return shutdown_ || version_ != sent; };
      // Wakes on news or shutdown; the timeout serves to notice a cancelled stream and to send
      // the published list again every kResendInterval.
      while (!mu_.AwaitWithTimeout(absl::Condition(&news), kCancelPollInterval)) {
        if (context->IsCancelled()) return grpc::Status::CANCELLED;
        if (version_ != 0 && absl::Now() - last_write >= kResendInterval) break;
      }
      if (shutdown_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plugin is stopping");
      sent = version_;
      response = ToProto(devices_);
    }
    if (!writer->Write(response)) {
      DRA_VLOG(2, "health stream closed by kubelet", "peer", context->peer());
      return grpc::Status::OK;
    }
    last_write = absl::Now();
  }
}

}  // namespace dra::kubeletplugin
