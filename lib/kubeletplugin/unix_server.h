#pragma once

// A gRPC server on one unix domain socket with the life cycle the kubelet expects of a plugin:
// a stale socket file at the path is removed before listening, and the server's own socket file
// is removed when it stops.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "grpcpp/server.h"

namespace dra::kubeletplugin {

// Longest usable unix socket path: sockaddr_un.sun_path holds 108 bytes including the NUL.
inline constexpr size_t kMaxUnixSocketPathLength = 107;

// Fails with InvalidArgument when `path` is not absolute or too long for a unix socket.
absl::Status CheckUnixSocketPath(const std::string& path);

// Removes a leftover socket file at `path`. Absent is fine; anything that is not a socket is left
// alone and reported (FailedPrecondition), since deleting someone's file by mistake is worse than
// refusing to start.
absl::Status RemoveStaleSocket(const std::string& path);

// Thread-safety: Stop may be called from any thread, at most concurrently with nothing else; the
// destructor stops. The services must outlive the server.
class UnixGrpcServer {
 public:
  // Serves `services` (plaintext, as the kubelet dials without TLS) on unix socket `path`.
  static absl::StatusOr<std::unique_ptr<UnixGrpcServer>> Start(
      const std::string& path, const std::vector<grpc::Service*>& services);
  ~UnixGrpcServer();

  // Stops accepting calls, gives running calls until `grace` to finish (then cancels them),
  // waits for them, and removes the socket file if it is still the one this server created.
  // Idempotent.
  void Stop(absl::Duration grace = absl::Seconds(1));

  const std::string& path() const { return path_; }

 private:
  UnixGrpcServer(std::string path, std::unique_ptr<grpc::Server> server, dev_t dev, ino_t ino)
      : path_(std::move(path)), server_(std::move(server)), dev_(dev), ino_(ino) {}

  const std::string path_;
  std::unique_ptr<grpc::Server> server_;  // null once stopped
  // Identity of our socket file, so Stop never removes a socket another process put there since.
  const dev_t dev_;
  const ino_t ino_;
};

}  // namespace dra::kubeletplugin
