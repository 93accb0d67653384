#include "lib/cddaemon/imex_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/common/log.h"

extern char** environ;

namespace dra::cddaemon {

absl::Duration RestartDelay(int failures, absl::Duration first_backoff,
                            absl::Duration max_backoff) {
  if (failures <= 1) return absl::ZeroDuration();
  absl::Duration d = first_backoff;
  for (int i = 2; i < failures && d < max_backoff; ++i) d *= 2;
  return std::min(d, max_backoff);
}

absl::StatusOr<std::string> FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) == 0) return program;
    return absl::ErrnoToStatus(errno, absl::StrCat("program ", program));
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(program, " not found in PATH (", dirs, ")"));
}

ImexProcess::ImexProcess(ImexProcessOptions options) : options_(std::move(options)) {}

ImexProcess::~ImexProcess() { Stop(); }

absl::Status ImexProcess::SpawnLocked() {
  std::vector<char*> argv;
  for (const std::string& a : options_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The daemon blocks its handled signals in every thread (lib/common/signals.h); the child must
  // start with an empty mask and default dispositions, or SIGTERM would never reach it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::ErrnoToStatus(rc, absl::StrCat("start ", absl::StrJoin(options_.argv, " ")));
  }
  pid_ = pid;
  started_at_ = absl::Now();
  DRA_INFO("started nvidia-imex", "pid", pid, "cmd", absl::StrJoin(options_.argv, " "));
  return absl::OkStatus();
}

absl::Status ImexProcess::EnsureStarted(bool* fresh) {
  *fresh = false;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::CancelledError("nvidia-imex supervision is stopping");
  wanted_ = true;
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { Watchdog(); });
  if (pid_ > 0 || consecutive_failures_ > 0) return absl::OkStatus();  // running or restarting
  absl::Status s = SpawnLocked();
  if (s.ok()) *fresh = true;
  return s;
}

absl::Status ImexProcess::Signal(int sig) {
  absl::MutexLock lock(&mu_);
  if (pid_ <= 0) return absl::FailedPreconditionError("nvidia-imex is not running");
  if (::kill(pid_, sig) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("signal ", sig, " to nvidia-imex pid ", pid_));
  }
  return absl::OkStatus();
}

void ImexProcess::CheckChildLocked() {
  if (pid_ <= 0) return;
  int wstatus = 0;
  pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
  if (r == 0) {
    if (consecutive_failures_ > 0 && absl::Now() - started_at_ >= options_.stable_period) {
      consecutive_failures_ = 0;  // ran long enough: the next crash restarts at once again
    }
    return;
  }
  std::string how = WIFEXITED(wstatus)     ? absl::StrCat("exit code ", WEXITSTATUS(wstatus))
                    : WIFSIGNALED(wstatus) ? absl::StrCat("signal ", WTERMSIG(wstatus))
                                           : "unknown status";
  if (absl::Now() - started_at_ >= options_.stable_period) consecutive_failures_ = 0;
  ++consecutive_failures_;
  absl::Duration delay =
      RestartDelay(consecutive_failures_, options_.first_backoff, options_.max_backoff);
  DRA_WARNING("nvidia-imex terminated unexpectedly; restarting", "pid", pid_, "how", how, "delay",
              delay);
  pid_ = 0;
  next_start_ = absl::Now() + delay;
}

void ImexProcess::Watchdog() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    CheckChildLocked();
    if (pid_ <= 0 && wanted_ && consecutive_failures_ > 0 && absl::Now() >= next_start_) {
      if (absl::Status s = SpawnLocked(); s.ok()) {
        ++restarts_;
      } else {
        ++consecutive_failures_;
        absl::Duration delay =
            RestartDelay(consecutive_failures_, options_.first_backoff, options_.max_backoff);
        DRA_ERROR("restart of nvidia-imex failed", "err", s, "retry_in", delay);
        next_start_ = absl::Now() + delay;
      }
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll_interval);
  }
}

void ImexProcess::Stop() {
  pid_t pid;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wanted_ = false;
  }
  if (watchdog_.joinable()) watchdog_.join();
  {
    absl::MutexLock lock(&mu_);
    pid = pid_;
    pid_ = 0;
  }
  if (pid > 0) Terminate(pid);
}

void ImexProcess::Terminate(pid_t pid) const {
  ::kill(pid, SIGTERM);
  absl::Time deadline = absl::Now() + options_.stop_timeout;
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, WNOHANG) == 0) {
    if (absl::Now() >= deadline) {
      DRA_WARNING("nvidia-imex did not exit after SIGTERM; sending SIGKILL", "pid", pid, "timeout",
                  options_.stop_timeout);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      return;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  DRA_INFO("nvidia-imex stopped", "pid", pid);
}

bool ImexProcess::running() const {
  absl::MutexLock lock(&mu_);
  return pid_ > 0;
}

pid_t ImexProcess::pid() const {
  absl::MutexLock lock(&mu_);
  return pid_;
}

int ImexProcess::restarts() const {
  absl::MutexLock lock(&mu_);
  return restarts_;
}

}  // namespace dra::cddaemon
