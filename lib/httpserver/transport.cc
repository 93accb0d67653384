#include "lib/httpserver/transport.h"

#include <sys/socket.h>

#include <cerrno>

namespace dra::httpserver {

Transport::Io PlainTransport::Read(char* buf, size_t len, size_t* n) {
  while (true) {
    ssize_t r = ::recv(fd_, buf, len, 0);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return Io::kOk;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWantRead;
    return Io::kClosed;
  }
}

Transport::Io PlainTransport::Write(const char* buf, size_t len, size_t* n) {
  while (true) {
    ssize_t r = ::send(fd_, buf, len, MSG_NOSIGNAL);
    if (r > 0) {
      *n = static_cast<size_t>(r);
      return Io::kOk;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWantWrite;
    return Io::kClosed;
  }
}

}  // namespace dra::httpserver
