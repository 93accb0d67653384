#pragma once

// The kubelet's last step when it registers a plugin: NotifyRegistrationStatus(registered) on the
// plugin's registration socket. A plugin's gRPC health port reports SERVING only after it
// (lib/kubeletplugin/health_server.h), so tests without a kubelet send it themselves.

#include <chrono>
#include <string>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "proto/pluginregistration/v1/api.grpc.pb.h"

namespace dra::testing {

// Tells the plugin listening on `registration_socket` that it is registered; retries until the
// socket answers or `timeout` passes. True when the plugin accepted it.
inline bool NotifyRegistered(const std::string& registration_socket,
                             std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto stub = pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix://" + registration_socket, grpc::InsecureChannelCredentials()));
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    pluginregistration::RegistrationStatus status;
    status.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse response;
    if (stub->NotifyRegistrationStatus(&ctx, status, &response).ok()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace dra::testing
