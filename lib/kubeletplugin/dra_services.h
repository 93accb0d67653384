#pragma once

// The DRAPlugin gRPC services, v1 and v1beta1, as translations onto one NodeService. v1beta1
// messages are v1 messages without Device.share_id, which is dropped on the way out (as the Go
// helper's conversion wrapper does).

#include "grpcpp/server_context.h"
#include "lib/kubeletplugin/node_service.h"
#include "proto/dra/v1/api.grpc.pb.h"
#include "proto/dra/v1beta1/api.grpc.pb.h"

namespace dra::kubeletplugin {

namespace drapb_v1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drapb_v1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// The absl status as a gRPC status; the numeric codes are the same.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The call's deadline, absl::InfiniteFuture() when the client set none.
absl::Time CallDeadline(const grpc::ServerContext& context);

// Thread-safety: called by gRPC from its threads; `node` must outlive the service.
class DraPluginV1Service final : public drapb_v1::DRAPlugin::Service {
 public:
  explicit DraPluginV1Service(NodeService* node) : node_(node) {}

  grpc::Status NodePrepareResources(grpc::ServerContext* context,
                                    const drapb_v1::NodePrepareResourcesRequest* request,
                                    drapb_v1::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(grpc::ServerContext* context,
                                      const drapb_v1::NodeUnprepareResourcesRequest* request,
                                      drapb_v1::NodeUnprepareResourcesResponse* response) override;

 private:
  NodeService* const node_;
};

// Thread-safety: as DraPluginV1Service.
class DraPluginV1beta1Service final : public drapb_v1beta1::DRAPlugin::Service {
 public:
  explicit DraPluginV1beta1Service(NodeService* node) : node_(node) {}

  grpc::Status NodePrepareResources(grpc::ServerContext* context,
                                    const drapb_v1beta1::NodePrepareResourcesRequest* request,
                                    drapb_v1beta1::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext* context, const drapb_v1beta1::NodeUnprepareResourcesRequest* request,
      drapb_v1beta1::NodeUnprepareResourcesResponse* response) override;

 private:
  NodeService* const node_;
};

}  // namespace dra::kubeletplugin
