#include "lib/kubeletplugin/unix_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::kubeletplugin {
namespace {

constexpr int kMinPollers = 1;
constexpr int kMaxPollers = 4;

}  // namespace

absl::Status CheckUnixSocketPath(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is not absolute"));
  }
  if (path.size() > kMaxUnixSocketPathLength) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is ", path.size(),
                                                   " bytes long, unix sockets allow at most ",
                                                   kMaxUnixSocketPathLength));
  }
  return absl::OkStatus();
}

absl::Status RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoToStatus(errno, absl::StrCat("stat ", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("remove stale socket ", path));
  }
  DRA_INFO("removed stale socket", "path", path);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<UnixGrpcServer>> UnixGrpcServer::Start(
    const std::string& path, const std::vector<grpc::Service*>& services) {
  RETURN_IF_ERROR(CheckUnixSocketPath(path));
  RETURN_IF_ERROR(RemoveStaleSocket(path));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", path), grpc::InsecureServerCredentials());
  for (grpc::Service* service : services) builder.RegisterService(service);
  // The synchronous server's threads poll for calls and run them. gRPC's default (at least 1
  // polling thread, at most 2) makes a thread and ends another whenever a call arrives while the
  // thread of the call before has not yet gone back to polling: the kubelet's next call right
  // after a response, or concurrent calls. Up to kMaxPollers threads that have served a call stay
  // and poll instead (threads are only made when every one is busy), so a burst of calls does not
  // pay a thread start each (docs/performance.md "Third pass").
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, kMinPollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxPollers);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    // gRPC logs the reason itself; the usual ones are a missing directory or no permission.
    return absl::UnavailableError(absl::StrCat("start gRPC server on unix socket ", path,
                                               " (does the directory exist and is it writable?)"));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    absl::Status status = ErrnoToStatus(errno, absl::StrCat("stat new socket ", path));
    server->Shutdown();
    return status;
  }
  DRA_INFO("serving gRPC", "socket", path);
  return std::unique_ptr<UnixGrpcServer>(
      new UnixGrpcServer(path, std::move(server), st.st_dev, st.st_ino));
}

UnixGrpcServer::~UnixGrpcServer() { Stop(); }

void UnixGrpcServer::Stop(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  server_.reset();
  struct stat st;
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) {
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
      DRA_WARNING("could not remove socket", "path", path_, "err", ErrnoToStatus(errno, "unlink"));
    }
  }
  DRA_INFO("stopped gRPC server", "socket", path_);
}

}  // namespace dra::kubeletplugin
