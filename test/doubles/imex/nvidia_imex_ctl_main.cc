// A fake nvidia-imex-ctl (see README.md in this directory): asks the fake nvidia-imex on
// IMEX_CMD_BIND_INTERFACE_IP:IMEX_CMD_PORT of the config, or on the unix socket given with --u,
// whether all of its peers are connected.
//
//   nvidia-imex-ctl -c <config file> -q
//   nvidia-imex-ctl -q --u=<socket path>      (also: -u <socket path>; a host-managed daemon's
//                                              IMEX_CMD_UNIX_DOMAIN_PATH)
//
// Prints exactly "READY\n" and exits 0 when they are; prints "NOT READY: <peers>\n" and exits 1
// when some are not; prints an error to stderr and exits 2 when the daemon cannot be asked.

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "test/doubles/imex/imex_config.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "nvidia-imex-ctl(fake): %s\n", msg.c_str());
  return 2;
}

constexpr char kUsage[] =
    "usage: nvidia-imex-ctl -c <config file> -q | nvidia-imex-ctl -q --u=<socket>";

// A connected socket to the daemon's command service, or -1 after printing why (`where` names it).
int Connect(const std::string& config_path, const std::string& unix_path, std::string* where) {
  timeval tv{5, 0};
  int fd = -1;
  if (!unix_path.empty()) {
    *where = "unix socket " + unix_path;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (unix_path.size() >= sizeof(sa.sun_path)) {
      Fail("unix socket path too long: " + unix_path);
      return -1;
    }
    unix_path.copy(sa.sun_path, unix_path.size());
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      Fail("cannot connect to the IMEX daemon at " + *where + ": " + std::strerror(errno));
      ::close(fd);
      return -1;
    }
    return fd;
  }
  std::string err;
  std::optional<fake_imex::ImexConfig> config = fake_imex::LoadImexConfig(config_path, &err);
  if (!config) {
    Fail(err);
    return -1;
  }
  std::string ip = config->cmd_bind_ip;
  if (ip.empty() || ip == "0.0.0.0") ip = "127.0.0.1";
  *where = ip + ":" + std::to_string(config->cmd_port);
  sockaddr_in sa;
  if (!fake_imex::MakeSockaddr(ip, config->cmd_port, &sa)) {
    Fail("IMEX_CMD_BIND_INTERFACE_IP is not an IPv4 address: " + ip);
    return -1;
  }
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    Fail("cannot connect to the IMEX daemon at " + *where + ": " + std::strerror(errno));
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  std::string unix_path;
  bool query = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-c" || a == "--config") && i + 1 < argc) {
      config_path = argv[++i];
    } else if ((a == "-u" || a == "--u") && i + 1 < argc) {
      unix_path = argv[++i];
    } else if (a.rfind("--u=", 0) == 0) {
      unix_path = a.substr(4);
    } else if (a == "-q" || a == "--query") {
      query = true;
    } else {
      return Fail("unknown argument " + a + "; " + kUsage);
    }
  }
  if ((config_path.empty() && unix_path.empty()) || !query) return Fail(kUsage);
  std::string where;
  int fd = Connect(config_path, unix_path, &where);
  if (fd < 0) return 2;
  static constexpr char kQuery[] = "QUERY\n";
  if (::send(fd, kQuery, sizeof(kQuery) - 1, MSG_NOSIGNAL) < 0) {
    return Fail("send to " + where + ": " + std::strerror(errno));
  }
  std::string answer;
  char buf[512];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  answer = fake_imex::Trim(answer);
  if (answer == "READY") {
    std::fputs("READY\n", stdout);
    return 0;
  }
  if (answer.rfind("NOT_READY", 0) == 0) {
    std::printf("NOT READY: waiting for peers:%s\n", answer.substr(9).c_str());
    return 1;
  }
  return Fail("no answer from the IMEX daemon at " + where);
}
