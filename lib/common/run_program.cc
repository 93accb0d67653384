#include "lib/common/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/status.h"

extern char** environ;

namespace dra {
namespace {

// Closes the descriptors it holds on every path out of RunProgram.
struct Fds {
  int fds[4] = {-1, -1, -1, -1};  // stdout read/write, stderr read/write
  ~Fds() {
    for (int& fd : fds) CloseOne(fd);
  }
  static void CloseOne(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// posix_spawn's attribute and file-action objects, destroyed on every path.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

void AppendTail(std::string& buffer, const char* data, size_t n, size_t max) {
  buffer.append(data, n);
  if (buffer.size() > max) buffer.erase(0, buffer.size() - max);
}

std::vector<std::string> Environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (!overrides.contains(key)) out.push_back(std::move(entry));
  }
  for (const auto& [k, v] : overrides) out.push_back(absl::StrCat(k, "=", v));
  return out;
}

}  // namespace

std::string CommandLine(const std::vector<std::string>& argv) {
  std::vector<std::string> parts;
  for (const std::string& a : argv) {
    parts.push_back(a.find_first_of(" \t\"'") == std::string::npos ? a : absl::StrCat("'", a, "'"));
  }
  return absl::StrJoin(parts, " ");
}

absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const RunProgramOptions& options) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    return absl::InvalidArgumentError("run program: argv[0] must be an absolute path");
  }
  const std::string what = absl::StrCat("run \"", CommandLine(argv), "\"");
  Fds fds;
  if (::pipe2(&fds.fds[0], O_CLOEXEC) != 0 || ::pipe2(&fds.fds[2], O_CLOEXEC) != 0) {
    return ErrnoToStatus(errno, absl::StrCat(what, ": pipe"));
  }
  SpawnSetup setup;
  // The plugin blocks the termination signals in every thread (signals.h); the child must not
  // inherit that, nor any handler disposition.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setpgroup(&setup.attr, 0);  // its own group: a timeout kills its children too
  posix_spawnattr_setflags(&setup.attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, fds.fds[1], 1);
  posix_spawn_file_actions_adddup2(&setup.actions, fds.fds[3], 2);
  posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);

  std::vector<std::string> env = Environment(options.env);
  std::vector<char*> c_argv, c_env;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const std::string& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);

  pid_t pid = -1;
  if (int err = posix_spawn(&pid, argv[0].c_str(), &setup.actions, &setup.attr, c_argv.data(),
                            c_env.data());
      err != 0) {
    return ErrnoToStatus(err, what);
  }
  Fds::CloseOne(fds.fds[1]);
  Fds::CloseOne(fds.fds[3]);

  ProgramResult result;
  const absl::Time deadline = absl::Now() + options.timeout;
  bool timed_out = false;
  char buf[4096];
  while (fds.fds[0] >= 0 || fds.fds[2] >= 0) {
    pollfd p[2] = {{fds.fds[0], POLLIN, 0}, {fds.fds[2], POLLIN, 0}};
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    int ready = ::poll(p, 2, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return ErrnoToStatus(errno, absl::StrCat(what, ": poll"));
    }
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      ssize_t n = ::read(p[i].fd, buf, sizeof(buf));
      if (n > 0) {
        AppendTail(i == 0 ? result.stdout_text : result.stderr_text, buf, static_cast<size_t>(n),
                   options.max_output_bytes);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        Fds::CloseOne(fds.fds[static_cast<size_t>(i) * 2]);
      }
    }
  }
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, absl::StrCat(what, ": waitpid"));
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": no result after ", absl::FormatDuration(options.timeout), "; killed"));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace dra
