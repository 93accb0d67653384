#include "lib/httpserver/listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::httpserver {
namespace {

absl::Status ParseAddress(const std::string& address, sockaddr_storage* out, socklen_t* len) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", address, "\": expected host:port, [ipv6]:port or :port"));
  }
  std::string host = address.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", address, "\": port must be 0..65535"));
  }
  bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  std::memset(out, 0, sizeof(*out));
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (host.empty() && !bracketed) {
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_any;
    v6->sin6_port = htons(port);
    *len = sizeof(*v6);
    return absl::OkStatus();
  }
  if (host == "localhost") host = "127.0.0.1";
  if (!bracketed && ::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(*v4);
    return absl::OkStatus();
  }
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof(*v6);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("listen address \"", address,
                   "\": host must be an IPv4 address, [an IPv6 address], localhost or empty"));
}

}  // namespace

absl::StatusOr<Listener> Listen(const std::string& address) {
  sockaddr_storage addr;
  socklen_t len = 0;
  RETURN_IF_ERROR(ParseAddress(address, &addr, &len));
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (fd < 0 && addr.ss_family == AF_INET6 && errno == EAFNOSUPPORT &&
      IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)) {
    // No IPv6 on this host: all IPv4 interfaces instead.
    in_port_t p = v6->sin6_port;
    std::memset(&addr, 0, sizeof(addr));
    auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
    v4->sin_family = AF_INET;
    v4->sin_port = p;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof(*v4);
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  }
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("listen on ", address, ": socket"));
  int one = 1, zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // Dual-stack for the wildcard address, whatever net.ipv6.bindv6only says.
  if (addr.ss_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(fd, kListenBacklog) != 0) {
    absl::Status s = ErrnoToStatus(errno, absl::StrCat("listen on ", address));
    ::close(fd);
    return s;
  }
  sockaddr_storage bound;
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  Listener l;
  l.fd = fd;
  l.port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return l;
}

}  // namespace dra::httpserver
