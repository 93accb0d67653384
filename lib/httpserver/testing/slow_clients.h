#pragma once

// Test helpers for servers that must not be stalled by slow clients: many loopback connections
// that send nothing or drip bytes, a timed client connect, and the file descriptor limit.
//
// Thread-safety: a SlowClients is used by one test thread; its drip thread is internal.

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::httpserver::testing {

using SteadyClock = std::chrono::steady_clock;

// Raises the soft RLIMIT_NOFILE to at least `needed` (up to the hard limit). Error when the hard
// limit is below `needed`: the caller skips with the message.
absl::Status EnsureFileLimit(int needed);

// A TCP connection to `host` ("127.0.0.1" or "::1") and `port`, or an error after `timeout`
// (a listener whose backlog is full leaves connect(2) waiting).
absl::StatusOr<int> ConnectWithTimeout(absl::string_view host, int port,
                                       std::chrono::milliseconds timeout);

// Waits until the peer closes `fd` (read returns 0 or an error) and returns how long that took,
// or -1 ms when `timeout` passed first. Discards what the server sends before it closes.
std::chrono::milliseconds WaitForEof(int fd, std::chrono::milliseconds timeout);

// This process's resident set (VmRSS of /proc/self/status) in KiB, or -1 when unreadable.
long RssKib();

// The durations in increasing order as "0.4ms 0.5ms ..." (for a test's log).
std::string Distribution(std::vector<std::chrono::microseconds> v);

class SlowClients {
 public:
  // Opens `silent` connections that never send a byte and `drip` connections that send `drip_data`
  // one byte per second (wrapping around), to host:port. Connections are opened one after another;
  // the first failure is returned.
  static absl::StatusOr<std::unique_ptr<SlowClients>> Open(absl::string_view host, int port,
                                                           int silent, int drip,
                                                           std::string drip_data);
  ~SlowClients();  // stops dripping, closes every socket

  // How many connections the server has closed by `deadline` (EOF or reset seen by the client),
  // waiting at most until then, and the latest close time relative to when the connection was
  // opened.
  struct Closed {
    int silent = 0;
    int drip = 0;
    std::chrono::milliseconds latest{0};
  };
  Closed WaitClosed(SteadyClock::time_point deadline);

 private:
  SlowClients() = default;
  void Drip();

  struct Conn {
    int fd = -1;
    bool drip = false;
    SteadyClock::time_point opened;
    bool closed = false;
  };
  std::vector<Conn> conns_;
  std::string drip_data_;
  std::atomic<bool> stop_{false};
  std::thread drip_thread_;
};

}  // namespace dra::httpserver::testing
