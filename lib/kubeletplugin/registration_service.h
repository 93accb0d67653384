#pragma once

// The kubelet plugin-watcher Registration service for a DRA driver: tells the kubelet who we are
// and where the DRA socket is, and records whether the kubelet accepted us.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server_context.h"
#include "lib/kubeletplugin/plugin_types.h"
#include "proto/pluginregistration/v1/api.grpc.pb.h"

namespace dra::kubeletplugin {

// PluginInfo.type of DRA drivers.
inline constexpr char kDraPluginType[] = "DRAPlugin";

// Thread-safety: gRPC calls it from its threads; status() may be called from any thread.
class RegistrationService final : public ::pluginregistration::Registration::Service {
 public:
  // `on_status`, if set, runs on a gRPC thread after each NotifyRegistrationStatus, without locks
  // held; it must return quickly.
  RegistrationService(std::string driver_name, std::string endpoint,
                      std::vector<std::string> supported_versions,
                      std::function<void(const RegistrationStatus&)> on_status)
      : driver_name_(std::move(driver_name)),
        endpoint_(std::move(endpoint)),
        supported_versions_(std::move(supported_versions)),
        on_status_(std::move(on_status)) {}

  grpc::Status GetInfo(grpc::ServerContext* context, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo* info) override;
  // Stores the status; a rejection is answered with a gRPC error, as the Go helper does.
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* context,
                                        const ::pluginregistration::RegistrationStatus* status,
                                        ::pluginregistration::RegistrationStatusResponse*) override;

  // Empty until the kubelet has called NotifyRegistrationStatus.
  std::optional<RegistrationStatus> status() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string driver_name_;
  const std::string endpoint_;
  const std::vector<std::string> supported_versions_;
  const std::function<void(const RegistrationStatus&)> on_status_;

  mutable absl::Mutex mu_;
  std::optional<RegistrationStatus> status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra::kubeletplugin
