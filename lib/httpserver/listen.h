#pragma once

// Listening TCP sockets for the server core (server.h; the metrics/health endpoints, the webhook):
// address parsing and a dual-stack listener.
//
// Thread-safety: free functions, thread-safe.

#include <string>

#include "absl/status/statusor.h"

namespace dra::httpserver {

// The backlog of every listener: the most the kernel allows (net.core.somaxconn caps it).
// Connections beyond a server's own limit are accepted and closed, not left in the backlog.
inline constexpr int kListenBacklog = 4096;

struct Listener {
  int fd = -1;  // non-blocking, close-on-exec
  int port = 0;
};

// Binds and listens on `address`:
//   ":port"           all interfaces: one IPv6 socket with IPV6_V6ONLY off (IPv6 and IPv4);
//                     an IPv4 socket on hosts without IPv6
//   "host:port"       an IPv4 address, or "localhost" (127.0.0.1)
//   "[v6]:port"       an IPv6 address, e.g. "[::1]:8080" or "[::]:8080" (dual-stack)
// Port 0 picks a free port. Errors name the address and what is allowed.
absl::StatusOr<Listener> Listen(const std::string& address);

}  // namespace dra::httpserver
