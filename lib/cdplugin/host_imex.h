#pragma once

// The readiness check of a host-managed IMEX daemon (--imex-mode=hostManaged,
// docs/compute-domains.md "Host-managed IMEX"): the host runs nvidia-imex itself, with its command
// channel on a unix socket (IMEX_CMD_UNIX_DOMAIN_PATH, by default /etc/nvidia-imex/imex_ctrl.sock
// on the host), and a channel claim is prepared only while that daemon answers READY.
//
// The check runs the driver root's nvidia-imex-ctl as `nvidia-imex-ctl -q --u=<socket>`, where
// <socket> is the configured host path resolved under the dev root (the directory where the
// plugin sees the host's /dev and /etc: "/driver-root" when the mounted driver root has a /dev,
// else "/"). The Go driver runs `chroot <dev root> nvidia-imex-ctl -q --u=<host path>` instead.
// Running the binary directly with the socket path prefixed gives the same query to the same
// socket without chroot: the plugin needs no CAP_SYS_CHROOT, and the dev root need not hold a
// complete root file system (a loader and libraries for the binary; the GPU Operator's driver
// container or a mock root has neither). The binary then uses the plugin image's libc, which
// nvidia-imex-ctl (glibc only) is built against.
//
// Thread-safety: immutable; Check may be called from any thread.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/driverroot/driver_root.h"

namespace dra::cdplugin {

class HostImex {
 public:
  // `root` must outlive this object. `socket_path`: the host's path of the command socket
  // (--imex-host-socket-path).
  HostImex(const driverroot::DriverRoot* root, std::string socket_path,
           absl::Duration timeout = absl::Seconds(10));

  // The socket as the plugin sees it: "<dev root><socket_path>".
  std::string SocketPath() const { return root_->DevPath(socket_path_); }

  // OK when nvidia-imex-ctl's output contains READY. Errors are retryable (the host's daemon may
  // be starting or restarting) and name the command and its output: nvidia-imex-ctl not in the
  // driver root, not startable, exited without READY, or ran past the timeout.
  absl::Status Check() const;

 private:
  const driverroot::DriverRoot* const root_;
  const std::string socket_path_;
  const absl::Duration timeout_;
};

}  // namespace dra::cdplugin
