#include "lib/kubeletplugin/serializer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::kubeletplugin {
namespace {

// How often a waiter retries a lock file held by another process.
constexpr absl::Duration kFlockPollInterval = absl::Milliseconds(10);

}  // namespace

Serializer::Guard::Guard(Guard&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), file_lock_(std::move(other.file_lock_)) {
  other.file_lock_.reset();
}

Serializer::Guard::~Guard() {
  file_lock_.reset();
  if (owner_ != nullptr) owner_->Release();
}

absl::StatusOr<std::unique_ptr<Serializer>> Serializer::Create(std::string lock_file) {
  if (!lock_file.empty()) {
    // FileLock would create the file with mode 0644; create it first the way the Go helper does
    // (O_RDWR|O_CREAT, 0666) so that the mode does not depend on which instance came first.
    int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("create lock file ", lock_file));
    ::close(fd);
  }
  return std::unique_ptr<Serializer>(new Serializer(std::move(lock_file)));
}

absl::StatusOr<Serializer::Guard> Serializer::Acquire(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&idle), deadline)) {
      return absl::DeadlineExceededError(
          "timed out waiting for another prepare/unprepare call in this process to finish");
    }
    busy_ = true;
  }
  Guard guard(this, std::nullopt);  // gives the gate back on every return below
  if (!lock_file_.empty()) {
    const absl::Duration wait = std::max(deadline - absl::Now(), absl::ZeroDuration());
    absl::StatusOr<FileLock> file_lock = FileLock::Acquire(lock_file_, wait, kFlockPollInterval);
    if (!file_lock.ok()) {
      return Annotate(file_lock.status(), "serialize with other plugin instances");
    }
    guard.file_lock_.emplace(*std::move(file_lock));
  }
  return guard;
}

void Serializer::Release() {
  absl::MutexLock lock(&mu_);
  busy_ = false;
}

}  // namespace dra::kubeletplugin
