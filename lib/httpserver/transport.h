#pragma once

// The byte stream under one connection of the server core (connection.h): plain TCP, or TLS
// (tls_transport.h), over a non-blocking socket that the connection owns. Nothing here blocks:
// an operation that needs the socket says which readiness it waits for.
//
// Thread-safety: owned and used by one loop thread.

#include <cstddef>
#include <string>

namespace dra::httpserver {

class Transport {
 public:
  enum class Io {
    kOk,         // done (Read/Write: *n bytes moved, at least one)
    kWantRead,   // wait until the socket is readable, then call again
    kWantWrite,  // wait until the socket is writable, then call again
    kClosed,     // the peer closed or reset, or spoke something else: the connection is over
  };

  virtual ~Transport() = default;

  // Whether the connection begins with a handshake (Handshake) before its first request; the
  // connection's handshake deadline applies to it.
  virtual bool has_handshake() const = 0;
  // Advances the handshake; kOk once it is complete. `scratch`: the loop's buffer.
  virtual Io Handshake(std::string* scratch) = 0;
  // True while the handshake waits for bytes that it has not read yet (they stay in the socket):
  // the connection then waits edge-triggered, for new bytes only.
  virtual bool peeking() const { return false; }
  virtual Io Read(char* buf, size_t len, size_t* n) = 0;
  virtual Io Write(const char* buf, size_t len, size_t* n) = 0;
  // Bytes already taken from the socket that Read has not returned yet (epoll does not see them).
  virtual bool HasPending() const { return false; }
  // The orderly end before the socket closes (TLS close_notify); best effort, never waits.
  virtual void Shutdown() {}
};

// Plain TCP: no handshake, recv/send (MSG_NOSIGNAL) on `fd`, which the caller owns.
class PlainTransport : public Transport {
 public:
  explicit PlainTransport(int fd) : fd_(fd) {}
  bool has_handshake() const override { return false; }
  Io Handshake(std::string*) override { return Io::kOk; }
  Io Read(char* buf, size_t len, size_t* n) override;
  Io Write(const char* buf, size_t len, size_t* n) override;

 private:
  const int fd_;
};

}  // namespace dra::httpserver
