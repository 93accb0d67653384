#pragma once

// A minimal HTTP/1.1 server for the operational endpoints of our daemons: /metrics, /healthz,
// /readyz. Plain TCP, one connection at a time, `Connection: close`: these endpoints are scraped a
// few times a minute and must not need more than that.
//
// Thread-safety: handlers run on the server's own thread; Start/Stop from any one thread.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace dra::metrics {

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse()>;

class HttpServer {
 public:
  // `address` is "host:port" or ":port" (all interfaces); port 0 picks a free port.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& address, std::map<std::string, HttpHandler> handlers);
  ~HttpServer();
  void Stop();
  int port() const { return port_; }

 private:
  HttpServer(int fd, int port, std::map<std::string, HttpHandler> handlers);
  void Serve();
  void HandleConnection(int fd);

  int fd_;
  int port_;
  const std::map<std::string, HttpHandler> handlers_;
  std::thread thread_;
};

}  // namespace dra::metrics
