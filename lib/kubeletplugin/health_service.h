#pragma once

// The optional DRAResourceHealth service: the driver publishes the complete health list of its
// devices whenever it changes, and every open kubelet stream receives the latest list (first the
// current one when it opens, then each change; intermediate lists may be skipped), and the
// current list again after 5 s without a change (the kubelet clears a driver's health when any
// of its streams ends, e.g. the old instance's in a surge rollout).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "lib/kubeletplugin/plugin_types.h"
#include "proto/dra_health/v1alpha1/api.grpc.pb.h"

namespace dra::kubeletplugin {

// Thread-safety: all methods may be called from any thread.
class HealthService final : public ::v1alpha1::DRAResourceHealth::Service {
 public:
  // Replaces the published list and wakes every stream.
  void Publish(std::vector<DeviceHealth> devices) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends every stream (now and later ones) so that the server can shut down promptly.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status NodeWatchResources(
      grpc::ServerContext* context, const ::v1alpha1::NodeWatchResourcesRequest* request,
      grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>* writer) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::vector<DeviceHealth> devices_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // 0: nothing published yet
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dra::kubeletplugin
