#include "lib/httpserver/metrics_endpoint.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::httpserver {

absl::StatusOr<std::unique_ptr<EndpointServer>> StartMetricsEndpoint(
    const std::string& endpoint, const std::string& metrics_path, metrics::Registry* registry) {
  if (endpoint.empty()) return nullptr;
  std::map<std::string, EndpointHandler> handlers;
  handlers["/healthz"] = [] { return HttpResponse{.body = "ok"}; };
  if (!metrics_path.empty()) {
    const std::string path =
        metrics_path[0] == '/' ? metrics_path : absl::StrCat("/", metrics_path);
    handlers[path] = [registry] {
      return HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8",
                          .body = registry->Render()};
    };
  }
  absl::StatusOr<std::unique_ptr<EndpointServer>> server =
      EndpointServer::Start({.address = endpoint, .registry = registry}, std::move(handlers));
  if (!server.ok()) return Annotate(server.status(), "--http-endpoint");
  DRA_INFO("serving metrics", "endpoint", endpoint, "port", (*server)->port(), "path",
           metrics_path);
  return server;
}

}  // namespace dra::httpserver
