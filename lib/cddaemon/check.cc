// The `check` subcommand: fast and quiet, as the kubelet runs it every probe period.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/cddaemon/daemon.h"
#include "lib/cddaemon/imex_files.h"

extern char** environ;

namespace dra::cddaemon {
namespace {

struct CommandResult {
  int exit_code = -1;  // -1: killed or not run
  std::string output;  // stdout and stderr together
};

// Runs `argv` with stdout and stderr into one pipe; kills it after `timeout`.
absl::StatusOr<CommandResult> RunCapturing(const std::vector<std::string>& argv,
                                           absl::Duration timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return absl::ErrnoToStatus(rc, absl::StrCat("run ", argv[0]));
  }
  CommandResult result;
  absl::Time deadline = absl::Now() + timeout;
  bool killed = false;
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    int wait_ms =
        static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
    if (::poll(&p, 1, wait_ms) == 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (result.output.size() < size_t{64} * 1024) result.output.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (killed) {
    return absl::DeadlineExceededError(
        absl::StrCat(argv[0], " did not finish within ", absl::FormatDuration(timeout)));
  }
  if (WIFEXITED(wstatus)) result.exit_code = WEXITSTATUS(wstatus);
  return result;
}

}  // namespace

absl::Status RunCheck(const DaemonConfig& config) {
  if (config.clique_id.empty()) return absl::OkStatus();  // non-fabric node: nothing to check
  absl::StatusOr<CommandResult> r = RunCapturing(
      {config.imex_ctl_binary, "-c", ConfigPath(config.imexd_dir), "-q"}, config.check_timeout);
  if (!r.ok())
    return absl::UnavailableError(absl::StrCat("IMEX daemon not ready: ", r.status().message()));
  if (r->exit_code != 0 || r->output != "READY\n") {
    return absl::UnavailableError(absl::StrCat(
        "IMEX daemon not ready: ", absl::StripTrailingAsciiWhitespace(r->output),
        r->exit_code == 0
            ? ""
            : absl::StrCat(" (", config.imex_ctl_binary, " exit code ", r->exit_code, ")")));
  }
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
