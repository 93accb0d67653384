#include "bench/computedomain/sim_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace dra::bench {

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const std::string& log, bool own_group) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& e : extra_env) env.push_back(e);
  std::vector<char*> argp, envp;
  for (const std::string& a : argv) argp.push_back(const_cast<char*>(a.c_str()));
  argp.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE, SIGCHLD}) {
    sigaddset(&defaults, s);
  }
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (own_group) flags |= POSIX_SPAWN_SETPGROUP;
  posix_spawnattr_setflags(&attr, flags);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

int WaitOrKill(pid_t pid, absl::Duration timeout, bool group) {
  if (pid <= 0) return -1;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  absl::Duration nap = absl::Milliseconds(1);
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0) return -1;
    if (absl::Now() >= deadline) break;
    absl::SleepFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(50));
  }
  ::kill(group ? -pid : pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

void KillGroup(pid_t pgid) {
  if (pgid <= 0) return;
  ::kill(-pgid, SIGKILL);
  int status = 0;
  ::waitpid(pgid, &status, 0);
}

ProcStats ReadProcStats(pid_t pid) {
  ProcStats s;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  auto kib = [&](absl::string_view key, double* mib) {
    if (absl::StartsWith(line, key)) {
      *mib = std::strtod(line.c_str() + key.size(), nullptr) / 1024.0;
    }
  };
  while (std::getline(status, line)) {
    s.alive = true;
    kib("VmHWM:", &s.peak_rss_mib);
    kib("VmRSS:", &s.rss_mib);
    if (absl::StartsWith(line, "Threads:")) s.threads = std::atoi(line.c_str() + 8);
  }
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren != std::string::npos) {
    // Fields after "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
    std::vector<std::string> f = absl::StrSplit(text.substr(paren + 2), ' ');
    if (f.size() > 12) {
      const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
      s.cpu_seconds =
          (std::strtod(f[11].c_str(), nullptr) + std::strtod(f[12].c_str(), nullptr)) / hz;
    }
  }
  return s;
}

std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(task.path() / "children");
    pid_t child;
    while (in >> child) out.push_back(child);
  }
  return out;
}

pid_t FindProcess(const std::string& comm) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid)) continue;
    std::ifstream in(e.path() / "comm");
    std::string name;
    if (std::getline(in, name) && name == comm) return pid;
  }
  return -1;
}

CpuTimes MachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  CpuTimes t;
  for (unsigned long long x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];  // minus idle and iowait
  return t;
}

double LoadAverage1m() {
  std::ifstream in("/proc/loadavg");
  double l = 0;
  in >> l;
  return l;
}

}  // namespace dra::bench
