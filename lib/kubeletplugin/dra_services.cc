#include "lib/kubeletplugin/dra_services.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace dra::kubeletplugin {
namespace {

// Both API versions have the same request shape: `repeated Claim claims = 1`.
template <typename Request>
std::vector<ClaimRef> ClaimRefs(const Request& request) {
  std::vector<ClaimRef> refs;
  refs.reserve(request.claims_size());
  for (const auto& claim : request.claims()) {
    refs.push_back(ClaimRef{claim.namespace_(), claim.name(), claim.uid()});
  }
  return refs;
}

// Fills a v1 or v1beta1 per-claim response; only v1's Device has share_id.
template <typename ClaimResponse>
void FillPrepared(const PrepareResult& result, ClaimResponse* out) {
  if (!result.status.ok()) {
    out->set_error(std::string(result.status.message()));
    return;
  }
  for (const PreparedDevice& device : result.devices) {
    auto* pb = out->add_devices();
    for (const std::string& name : device.request_names) pb->add_request_names(name);
    pb->set_pool_name(device.pool_name);
    pb->set_device_name(device.device_name);
    for (const std::string& id : device.cdi_device_ids) pb->add_cdi_device_ids(id);
    if constexpr (requires { pb->set_share_id(std::string()); }) {
      if (device.share_id.has_value()) pb->set_share_id(*device.share_id);
    }
  }
}

template <typename Request, typename Response>
grpc::Status Prepare(NodeService* node, const grpc::ServerContext& context, const Request& request,
                     Response* response) {
  absl::StatusOr<std::map<std::string, PrepareResult>> results =
      node->Prepare(ClaimRefs(request), CallDeadline(context));
  if (!results.ok()) return ToGrpcStatus(results.status());
  for (const auto& [uid, result] : *results) {
    FillPrepared(result, &(*response->mutable_claims())[uid]);
  }
  return grpc::Status::OK;
}

template <typename Request, typename Response>
grpc::Status Unprepare(NodeService* node, const grpc::ServerContext& context,
                       const Request& request, Response* response) {
  absl::StatusOr<std::map<std::string, absl::Status>> results =
      node->Unprepare(ClaimRefs(request), CallDeadline(context));
  if (!results.ok()) return ToGrpcStatus(results.status());
  for (const auto& [uid, status] : *results) {
    auto& entry = (*response->mutable_claims())[uid];  // present even when empty
    if (!status.ok()) entry.set_error(std::string(status.message()));
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Time CallDeadline(const grpc::ServerContext& context) {
  const std::chrono::system_clock::time_point deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

grpc::Status DraPluginV1Service::NodePrepareResources(
    grpc::ServerContext* context, const drapb_v1::NodePrepareResourcesRequest* request,
    drapb_v1::NodePrepareResourcesResponse* response) {
  return Prepare(node_, *context, *request, response);
}

grpc::Status DraPluginV1Service::NodeUnprepareResources(
    grpc::ServerContext* context, const drapb_v1::NodeUnprepareResourcesRequest* request,
    drapb_v1::NodeUnprepareResourcesResponse* response) {
  return Unprepare(node_, *context, *request, response);
}

grpc::Status DraPluginV1beta1Service::NodePrepareResources(
    grpc::ServerContext* context, const drapb_v1beta1::NodePrepareResourcesRequest* request,
    drapb_v1beta1::NodePrepareResourcesResponse* response) {
  return Prepare(node_, *context, *request, response);
}

grpc::Status DraPluginV1beta1Service::NodeUnprepareResources(
    grpc::ServerContext* context, const drapb_v1beta1::NodeUnprepareResourcesRequest* request,
    drapb_v1beta1::NodeUnprepareResourcesResponse* response) {
  return Unprepare(node_, *context, *request, response);
}

}  // namespace dra::kubeletplugin
