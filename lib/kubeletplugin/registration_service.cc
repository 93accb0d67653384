#include "lib/kubeletplugin/registration_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/log.h"

namespace dra::kubeletplugin {

grpc::Status RegistrationService::GetInfo(grpc::ServerContext*,
                                          const ::pluginregistration::InfoRequest*,
                                          ::pluginregistration::PluginInfo* info) {
  info->set_type(kDraPluginType);
  info->set_name(driver_name_);
  info->set_endpoint(endpoint_);
  for (const std::string& version : supported_versions_) info->add_supported_versions(version);
  DRA_VLOG(2, "kubelet asked for plugin info", "driver", driver_name_, "endpoint", endpoint_,
           "versions", absl::StrJoin(supported_versions_, ","));
  return grpc::Status::OK;
}

grpc::Status RegistrationService::NotifyRegistrationStatus(
    grpc::ServerContext*, const ::pluginregistration::RegistrationStatus* status,
    ::pluginregistration::RegistrationStatusResponse*) {
  RegistrationStatus stored{status->plugin_registered(), status->error()};
  {
    absl::MutexLock lock(&mu_);
    status_ = stored;
  }
  if (on_status_) on_status_(stored);
  if (!stored.registered) {
    DRA_ERROR("kubelet rejected plugin registration", "driver", driver_name_, "err", stored.error);
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        absl::StrCat("failed registration process: ", stored.error));
  }
  DRA_INFO("plugin registered with kubelet", "driver", driver_name_, "endpoint", endpoint_);
  return grpc::Status::OK;
}

std::optional<RegistrationStatus> RegistrationService::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace dra::kubeletplugin
