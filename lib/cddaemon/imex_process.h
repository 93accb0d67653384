#pragma once

// Supervision of the nvidia-imex child (spec "nvidia-imex supervision"), improved on the Go
// daemon: stopping sends SIGTERM, then SIGKILL after a timeout; restarts after unexpected exits
// back off (the first is immediate, later ones wait 0.5 s, 1 s, ... up to a cap; a child that ran
// for a stable period resets the sequence), so a crash-looping binary does not spin.
//
// Thread-safety: all methods may be called from any thread. A watchdog thread, started by the
// first successful EnsureStarted, reaps and restarts the child until Stop.

#include <sys/types.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dra::cddaemon {

struct ImexProcessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  absl::Duration stop_timeout = absl::Seconds(10);
  absl::Duration first_backoff = absl::Milliseconds(500);  // the second restart's delay
  absl::Duration max_backoff = absl::Seconds(10);
  absl::Duration stable_period = absl::Seconds(60);
  absl::Duration poll_interval = absl::Milliseconds(200);
};

class ImexProcess {
 public:
  explicit ImexProcess(ImexProcessOptions options);
  ~ImexProcess();  // Stop()
  ImexProcess(const ImexProcess&) = delete;
  ImexProcess& operator=(const ImexProcess&) = delete;

  // Starts the child unless it runs (or a restart is pending); `*fresh` tells whether this call
  // started it. An error when the program cannot be started (not found, not executable).
  absl::Status EnsureStarted(bool* fresh) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `sig` to the running child; FailedPrecondition when none runs.
  absl::Status Signal(int sig) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the watchdog, then the child: SIGTERM, up to stop_timeout for it to exit, then SIGKILL.
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  bool running() const ABSL_LOCKS_EXCLUDED(mu_);
  pid_t pid() const ABSL_LOCKS_EXCLUDED(mu_);
  // Restarts done by the watchdog after unexpected exits.
  int restarts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status SpawnLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Watchdog();
  // Reaps an exited child and schedules the restart.
  void CheckChildLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SIGTERM, up to stop_timeout, then SIGKILL; reaps `pid`.
  void Terminate(pid_t pid) const;

  const ImexProcessOptions options_;
  mutable absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = 0;
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;  // EnsureStarted was called and Stop was not
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time started_at_ ABSL_GUARDED_BY(mu_);
  absl::Time next_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watchdog_;
};

// `program` itself when it contains a '/', else the first executable <dir>/<program> of $PATH.
// NotFound naming the program and the PATH searched.
absl::StatusOr<std::string> FindProgram(const std::string& program);

// The restart delay after `failures` consecutive unexpected exits (1 = the first): zero for the
// first, then first_backoff doubling up to max_backoff.
absl::Duration RestartDelay(int failures, absl::Duration first_backoff, absl::Duration max_backoff);

}  // namespace dra::cddaemon
