#include "lib/kubeletplugin/plugin_server.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/kubeletplugin/dra_services.h"
#include "lib/kubeletplugin/health_service.h"
#include "lib/kubeletplugin/node_service.h"
#include "lib/kubeletplugin/registration_service.h"
#include "lib/kubeletplugin/serializer.h"
#include "lib/kubeletplugin/stale_sockets.h"
#include "lib/kubeletplugin/unix_server.h"

namespace dra::kubeletplugin {
namespace {

constexpr char kSerializeLockFile[] = "serialize.lock";
// How long running calls may finish when the DRA server stops.
constexpr absl::Duration kStopGrace = absl::Seconds(1);

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return path;  // CheckUnixSocketPath reports the relative path
  return abs.lexically_normal().string();
}

absl::Status RequireDirectory(const std::string& path, absl::string_view what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return ErrnoToStatus(errno, absl::StrCat(what, " ", path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", path, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status EnsureDirectory(const std::string& path, absl::string_view what) {
  if (::mkdir(path.c_str(), 0750) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, absl::StrCat("create ", what, " ", path));
  }
  return RequireDirectory(path, what);
}

absl::Status ValidateName(const std::string& value, absl::string_view option) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(option, " must be set"));
  if (absl::StrContains(value, "/") || value == "." || value == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(option, " \"", value, "\" cannot be used in a file name"));
  }
  return absl::OkStatus();
}

// A failed sweep costs only tidiness, never the start.
void SweepLeftoverSockets(const StaleSocketSweep& sweep) {
  absl::StatusOr<std::vector<std::string>> removed = SweepStaleSockets(sweep);
  if (!removed.ok()) {
    DRA_WARNING("could not sweep leftover sockets", "dir", sweep.dir, "err",
                removed.status().message());
  }
}

}  // namespace

struct PluginServer::Impl {
  std::unique_ptr<Serializer> serializer;  // null with serialize = false
  std::unique_ptr<NodeService> node;
  std::unique_ptr<DraPluginV1Service> v1;
  std::unique_ptr<DraPluginV1beta1Service> v1beta1;
  // Always on the DRA socket; publishes only with serve_health (see PluginServerOptions).
  std::unique_ptr<HealthService> health;
  bool publish_health = false;
  std::unique_ptr<RegistrationService> registration;
  // Declared after the services: destroyed (stopped) before them.
  std::unique_ptr<UnixGrpcServer> dra_server;
  std::unique_ptr<UnixGrpcServer> registration_server;
  absl::Mutex stop_mu;  // makes Stop safe to call from several threads (signal thread, dtor)
};

PluginServer::PluginServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PluginServer::~PluginServer() { Stop(); }

absl::StatusOr<std::unique_ptr<PluginServer>> PluginServer::Create(DraDriver* driver,
                                                                   PluginServerOptions options) {
  if (driver == nullptr) return absl::InvalidArgumentError("driver must be set");
  RETURN_IF_ERROR(ValidateName(options.driver_name, "driver name"));
  if (!options.claim_getter) return absl::InvalidArgumentError("claim getter must be set");
  const bool rolling_update = !options.pod_uid.empty();
  if (rolling_update) RETURN_IF_ERROR(ValidateName(options.pod_uid, "pod UID"));

  std::vector<std::string> versions;
  if (options.serve_v1) versions.push_back(kDraV1Service);
  if (options.serve_v1beta1) versions.push_back(kDraV1beta1Service);
  if (versions.empty()) {
    return absl::InvalidArgumentError("at least one of the v1 and v1beta1 DRA services must be on");
  }
  if (options.serve_health) versions.push_back(kDraHealthService);

  // Directories and socket paths, all absolute: the kubelet uses the endpoint verbatim.
  const std::string plugin_data_dir =
      AbsolutePath(options.plugin_data_dir.empty()
                       ? absl::StrCat(options.kubelet_plugins_dir, "/", options.driver_name)
                       : options.plugin_data_dir);
  const std::string registry_dir = AbsolutePath(options.registry_dir);
  RETURN_IF_ERROR(EnsureDirectory(plugin_data_dir, "plugin data directory"));
  RETURN_IF_ERROR(RequireDirectory(registry_dir, "kubelet plugin registry directory"));
  const std::string dra_socket =
      rolling_update ? absl::StrCat(plugin_data_dir, "/dra-", options.pod_uid, ".sock")
                     : absl::StrCat(plugin_data_dir, "/dra.sock");
  const std::string registration_socket =
      rolling_update
          ? absl::StrCat(registry_dir, "/", options.driver_name, "-", options.pod_uid, "-reg.sock")
          : absl::StrCat(registry_dir, "/", options.driver_name, "-reg.sock");
  RETURN_IF_ERROR(CheckUnixSocketPath(dra_socket));
  RETURN_IF_ERROR(CheckUnixSocketPath(registration_socket));
  if (rolling_update) {
    // Killed earlier instances cannot remove their pod-UID-named sockets (stale_sockets.h).
    SweepLeftoverSockets({.dir = plugin_data_dir,
                          .prefix = "dra-",
                          .suffix = ".sock",
                          .keep = dra_socket,
                          .min_age = options.stale_socket_min_age});
    SweepLeftoverSockets({.dir = registry_dir,
                          .prefix = absl::StrCat(options.driver_name, "-"),
                          .suffix = "-reg.sock",
                          .keep = registration_socket,
                          .min_age = options.stale_socket_min_age});
  }

  auto impl = std::make_unique<Impl>();
  std::string lock_path;
  if (options.serialize) {
    if (rolling_update) {
      const std::string lock_dir = options.serialize_lock_dir.empty()
                                       ? plugin_data_dir
                                       : AbsolutePath(options.serialize_lock_dir);
      RETURN_IF_ERROR(RequireDirectory(lock_dir, "serialize lock directory"));
      lock_path = absl::StrCat(lock_dir, "/", kSerializeLockFile);
    }
    ASSIGN_OR_RETURN(impl->serializer, Serializer::Create(lock_path));
  }
  impl->node = std::make_unique<NodeService>(driver, std::move(options.claim_getter),
                                             impl->serializer.get(), options.lock_timeout,
                                             options.trace_calls, options.claim_lookup);

  std::vector<grpc::Service*> dra_services;
  if (options.serve_v1) {
    impl->v1 = std::make_unique<DraPluginV1Service>(impl->node.get());
    dra_services.push_back(impl->v1.get());
  }
  if (options.serve_v1beta1) {
    impl->v1beta1 = std::make_unique<DraPluginV1beta1Service>(impl->node.get());
    dra_services.push_back(impl->v1beta1.get());
  }
  impl->health = std::make_unique<HealthService>();
  impl->publish_health = options.serve_health;
  dra_services.push_back(impl->health.get());
  impl->registration = std::make_unique<RegistrationService>(
      options.driver_name, dra_socket, versions, std::move(options.on_registration_status));

  // The DRA socket must be serving before the kubelet can find the registration socket.
  ASSIGN_OR_RETURN(impl->dra_server, UnixGrpcServer::Start(dra_socket, dra_services));
  absl::StatusOr<std::unique_ptr<UnixGrpcServer>> registration_server =
      UnixGrpcServer::Start(registration_socket, {impl->registration.get()});
  if (!registration_server.ok()) {
    impl->health->Shutdown();
    impl->dra_server->Stop();
    return registration_server.status();
  }
  impl->registration_server = *std::move(registration_server);

  DRA_INFO("kubelet plugin started", "driver", options.driver_name, "dra_socket", dra_socket,
           "registration_socket", registration_socket, "versions", absl::StrJoin(versions, ","),
           "serialize", options.serialize, "lock_file", lock_path);
  auto server = std::unique_ptr<PluginServer>(new PluginServer(std::move(impl)));
  server->dra_socket_path_ = dra_socket;
  server->registration_socket_path_ = registration_socket;
  server->serialize_lock_path_ = lock_path;
  server->supported_versions_ = std::move(versions);
  return server;
}

void PluginServer::Stop() {
  absl::MutexLock lock(&impl_->stop_mu);
  // Same order as the Go helper: the DRA service first, then the registration.
  if (impl_->health) impl_->health->Shutdown();
  if (impl_->dra_server) impl_->dra_server->Stop(kStopGrace);
  if (impl_->registration_server) impl_->registration_server->Stop(kStopGrace);
}

void PluginServer::PublishHealth(std::vector<DeviceHealth> devices) {
  if (impl_->publish_health) impl_->health->Publish(std::move(devices));
}

std::optional<RegistrationStatus> PluginServer::registration_status() const {
  return impl_->registration->status();
}

}  // namespace dra::kubeletplugin
