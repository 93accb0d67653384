#pragma once

// The plugin's gRPC health endpoint (grpc.health.v1.Health/Check on a TCP port, for Kubernetes
// gRPC probes). It reports SERVING only when the plugin's own DRA socket answers a
// NodePrepareResources call with no claims, so a wedged DRA server fails the probe, and, when
// `registered` is given, only once it returns true: the kubelet has registered the plugin. The
// pod is then Ready only when the kubelet can call it, and a surge rollout stops the old pod
// only after the kubelet has registered the new one (docs/helm.md "Rolling updates of the
// kubelet plugins").
//
// Thread-safety: Start/Stop from one thread; Check runs on gRPC threads.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace dra::kubeletplugin {

class PluginServer;

class HealthServer {
 public:
  // `port` 0 picks a free port. `dra_socket` is the absolute path of the plugin's DRA socket.
  // `registered` (may be empty): whether the kubelet has registered the plugin.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(
      int port, const std::string& dra_socket, std::function<bool()> registered = nullptr);
  // Start for `server`'s DRA socket, SERVING only once the kubelet has registered it
  // (PluginServer::registration_status): what both kubelet plugins serve. `server` must outlive
  // the HealthServer.
  static absl::StatusOr<std::unique_ptr<HealthServer>> StartFor(int port,
                                                                const PluginServer* server);
  ~HealthServer();
  void Stop();
  int port() const { return port_; }

 private:
  class Service;
  HealthServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace dra::kubeletplugin
