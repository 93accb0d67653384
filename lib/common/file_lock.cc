#include "lib/common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra {
namespace {

// True when `fd` still refers to the file at `path`: a holder may have replaced or removed the
// file between our open and our flock, and a lock on an orphaned inode protects nothing.
bool SameFile(int fd, const std::string& path) {
  struct stat by_fd, by_path;
  if (::fstat(fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0) return false;
  return by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path, absl::Duration timeout,
                                           absl::Duration poll_interval) {
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  poll_interval = std::max(poll_interval, absl::Milliseconds(1));
  while (true) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("open lock file ", path));
    }
    FileLock candidate(path, fd);  // closes fd on every early return
    while (true) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) return ErrnoToStatus(errno, absl::StrCat("flock ", path));
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "timed out after ", absl::FormatDuration(timeout), " acquiring lock ", path));
      }
      absl::SleepFor(std::min(poll_interval, deadline - now));
    }
    if (SameFile(fd, path)) return candidate;
    // Locked a file that is no longer at `path`: drop it and open the current one.
  }
}

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() { Release(); }

void FileLock::Release() {
  // Closing the only descriptor of the open file description releases the flock.
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

}  // namespace dra
