#include "lib/kubeletplugin/stale_sockets.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"

namespace dra::kubeletplugin {

namespace {

// The outcome of one connect(2) to the Unix socket at `path`: 0 when it was accepted, else the
// errno; -1 when no attempt could be made (the path is too long for sockaddr_un, no socket).
int ConnectOnce(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

bool SocketRefusesConnections(const std::string& path) { return ConnectOnce(path) == ECONNREFUSED; }

bool SocketAcceptsConnections(const std::string& path) { return ConnectOnce(path) == 0; }

std::vector<std::string> LiveSockets(const StaleSocketSweep& match) {
  std::vector<std::string> live;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(match.dir.c_str()), ::closedir);
  if (dir == nullptr) return live;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, match.prefix) || !absl::EndsWith(name, match.suffix)) continue;
    const std::string path = absl::StrCat(match.dir, "/", name);
    if (path == match.keep) continue;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (SocketAcceptsConnections(path)) live.push_back(path);
  }
  return live;
}

absl::StatusOr<std::vector<std::string>> SweepStaleSockets(const StaleSocketSweep& sweep) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(sweep.dir.c_str()), ::closedir);
  if (dir == nullptr) return dra::ErrnoToStatus(errno, absl::StrCat("read directory ", sweep.dir));
  const absl::Time now = absl::Now();
  std::vector<std::string> removed;
  while (const dirent* entry = ::readdir(dir.get())) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, sweep.prefix) || !absl::EndsWith(name, sweep.suffix)) continue;
    const std::string path = absl::StrCat(sweep.dir, "/", name);
    if (path == sweep.keep) continue;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (now - absl::TimeFromTimespec(st.st_ctim) < sweep.min_age) continue;
    if (!SocketRefusesConnections(path)) continue;
    if (::unlink(path.c_str()) != 0) {
      if (errno != ENOENT)
        DRA_WARNING("could not remove stale socket", "path", path, "errno", errno);
      continue;
    }
    DRA_INFO("removed a socket an earlier plugin instance left behind", "path", path);
    removed.push_back(path);
  }
  return removed;
}

}  // namespace dra::kubeletplugin
