#pragma once

// Orders NodePrepareResources/NodeUnprepareResources calls so that the driver never runs two at
// once: an in-process gate, plus (in rolling-update mode) an exclusive flock on a lock file shared
// by every plugin instance on the node. Waiting is bounded by a deadline so that a stuck holder
// makes callers fail (and the kubelet retry) instead of piling up past the kubelet's timeout.

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/common/file_lock.h"

namespace dra::kubeletplugin {

// Thread-safety: Acquire may be called from any thread; a Guard is owned by the thread that got it
// and must be destroyed before the Serializer.
class Serializer {
 public:
  // Holds the serialization until destroyed.
  class Guard {
   public:
    Guard(Guard&& other) noexcept;
    Guard& operator=(Guard&&) = delete;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard();

   private:
    friend class Serializer;
    Guard(Serializer* owner, std::optional<FileLock> file_lock)
        : owner_(owner), file_lock_(std::move(file_lock)) {}

    Serializer* owner_;                  // null once moved from
    std::optional<FileLock> file_lock_;  // released before the in-process gate
  };

  // `lock_file` empty: in-process only. Otherwise the file is created now if missing (mode 0666
  // before umask, so that instances running as other users can open it too), and every Acquire
  // also flocks it.
  static absl::StatusOr<std::unique_ptr<Serializer>> Create(std::string lock_file);

  // Waits until no other Guard (of this Serializer, or of any process on `lock_file`) is held,
  // or fails with DeadlineExceeded once `deadline` has passed.
  absl::StatusOr<Guard> Acquire(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& lock_file() const { return lock_file_; }

 private:
  explicit Serializer(std::string lock_file) : lock_file_(std::move(lock_file)) {}
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string lock_file_;
  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dra::kubeletplugin
