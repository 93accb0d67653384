#pragma once

// An exclusive flock(2) on a lock file, held for the lifetime of a FileLock object. flock locks
// belong to the open file description, so two FileLocks on one path exclude each other whether
// they are in different processes or in different threads of one process. A child forked while
// the lock is held shares it until the child closes the descriptor (it is O_CLOEXEC, so exec
// closes it). The lock file itself is left in place: deleting it would let two holders lock
// different inodes (Acquire detects a lock taken on a file that was replaced, and retries).

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dra {

// Thread-safety: a FileLock object is owned by one thread at a time (it may be moved between
// threads); Acquire may be called from any thread.
class FileLock {
 public:
  // Opens (creating with mode 0644 if needed) `path` and takes an exclusive lock, retrying every
  // `poll_interval` until `timeout` has passed. A zero timeout tries once; absl::InfiniteDuration()
  // waits forever. DeadlineExceeded "timed out after <timeout> acquiring lock <path>" when another
  // holder keeps it; other errors name the path and the failing call.
  static absl::StatusOr<FileLock> Acquire(const std::string& path, absl::Duration timeout,
                                          absl::Duration poll_interval = absl::Milliseconds(100));

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Releases the lock.
  ~FileLock();

  // Releases the lock now (idempotent).
  void Release();
  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  FileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;
};

}  // namespace dra
