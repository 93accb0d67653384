#include "lib/httpserver/endpoint_server.h"

#include <utility>

#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::httpserver {

absl::StatusOr<std::unique_ptr<EndpointServer>> EndpointServer::Start(
    const std::string& address, std::map<std::string, EndpointHandler> handlers) {
  EndpointServerOptions options;
  options.address = address;
  return Start(std::move(options), std::move(handlers));
}

absl::StatusOr<std::unique_ptr<EndpointServer>> EndpointServer::Start(
    EndpointServerOptions options, std::map<std::string, EndpointHandler> handlers) {
  ServerOptions core;
  core.address = std::move(options.address);
  core.keep_alive = false;
  core.max_header_bytes = kEndpointMaxRequestBytes;
  core.max_body_bytes = 0;
  core.max_buffered_request_bytes = 0;  // 2048 connections of at most 16 KiB each
  core.request_timeout = options.request_timeout;
  core.write_timeout = options.write_timeout;
  core.max_connections = options.max_connections;
  core.loop_threads = 1;
  core.thread_name = "http-endpoint";
  core.log_name = "http endpoint";
  core.shutdown_grace = absl::ZeroDuration();
  core.registry = options.registry;
  core.metrics_prefix = std::move(options.metrics_prefix);
  auto route = [handlers = std::move(handlers)](const HttpRequest& request) {
    auto it = handlers.find(std::string(request.path));
    if (it == handlers.end()) {
      return HttpResponse{404, "text/plain; charset=utf-8", "404 page not found\n"};
    }
    if (request.method != "GET" && request.method != "HEAD") {
      return HttpResponse{405, "text/plain; charset=utf-8", "method not allowed\n"};
    }
    HttpResponse response = it->second();
    DRA_VLOG(6, "served http request", "method", request.method, "path", request.path, "code",
             response.code);
    return response;
  };
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(std::move(core), std::move(route));
  if (!server.ok()) return Annotate(server.status(), "http endpoint");
  return std::unique_ptr<EndpointServer>(new EndpointServer(*std::move(server)));
}

}  // namespace dra::httpserver
