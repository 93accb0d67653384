#include "lib/kubeletplugin/health_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/kubeletplugin/plugin_server.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "proto/grpc_health/v1/health.grpc.pb.h"

namespace dra::kubeletplugin {

namespace healthpb = ::grpc::health::v1;
namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

class HealthServer::Service final : public healthpb::Health::Service {
 public:
  Service(const std::string& dra_socket, std::function<bool()> registered)
      : dra_(drapb::DRAPlugin::NewStub(
            grpc::CreateChannel("unix://" + dra_socket, grpc::InsecureChannelCredentials()))),
        registered_(std::move(registered)) {}

  grpc::Status Check(grpc::ServerContext*, const healthpb::HealthCheckRequest* request,
                     healthpb::HealthCheckResponse* response) override {
    if (!request->service().empty() && request->service() != "liveness") {
      response->set_status(healthpb::HealthCheckResponse::SERVICE_UNKNOWN);
      return grpc::Status::OK;
    }
    if (registered_ && !registered_()) {
      DRA_VLOG(2, "health check: the kubelet has not registered the plugin yet");
      response->set_status(healthpb::HealthCheckResponse::NOT_SERVING);
      return grpc::Status::OK;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    drapb::NodePrepareResourcesRequest empty;
    drapb::NodePrepareResourcesResponse ignored;
    grpc::Status s = dra_->NodePrepareResources(&ctx, empty, &ignored);
    if (!s.ok()) {
      DRA_WARNING("health check: the DRA socket does not answer", "err", s.error_message());
    }
    response->set_status(s.ok() ? healthpb::HealthCheckResponse::SERVING
                                : healthpb::HealthCheckResponse::NOT_SERVING);
    return grpc::Status::OK;
  }

 private:
  std::unique_ptr<drapb::DRAPlugin::Stub> dra_;
  const std::function<bool()> registered_;
};

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::Start(
    int port, const std::string& dra_socket, std::function<bool()> registered) {
  auto h = std::unique_ptr<HealthServer>(new HealthServer());
  h->service_ = std::make_unique<Service>(dra_socket, std::move(registered));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("0.0.0.0:", port), grpc::InsecureServerCredentials(),
                           &h->port_);
  builder.RegisterService(h->service_.get());
  h->server_ = builder.BuildAndStart();
  if (!h->server_ || h->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("health service: cannot listen on port ", port));
  }
  return h;
}

absl::StatusOr<std::unique_ptr<HealthServer>> HealthServer::StartFor(int port,
                                                                     const PluginServer* server) {
  return Start(port, server->dra_socket_path(), [server] {
    std::optional<RegistrationStatus> s = server->registration_status();
    return s.has_value() && s->registered;
  });
}

HealthServer::~HealthServer() { Stop(); }

void HealthServer::Stop() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
}

}  // namespace dra::kubeletplugin
