#pragma once

// Child processes of the ComputeDomain benchmark (controller, daemons, probes) and what /proc says
// about them. Not a test helper; the bench prints what it measures and never asserts timing.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dra::bench {

// posix_spawn of `argv` with `extra_env` ("K=V") added to this process's environment, stdout and
// stderr appended to `log`, signals unblocked and at their defaults. With `own_group` the child
// leads a new process group (so KillGroup also reaches the programs it starts). -1 on failure.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const std::string& log, bool own_group);

// Waits up to `timeout` for `pid`; SIGKILLs it (its group when `group`) and reaps it after that.
// Returns the exit code, or -1 when it was killed or could not be waited for.
int WaitOrKill(pid_t pid, absl::Duration timeout, bool group);

// SIGKILL to the process group `pgid` (led by a Spawn(own_group) child) and reaps its leader.
void KillGroup(pid_t pgid);

struct ProcStats {
  bool alive = false;
  double peak_rss_mib = 0;  // VmHWM
  double rss_mib = 0;       // VmRSS
  double cpu_seconds = 0;   // utime + stime
  int threads = 0;
};
ProcStats ReadProcStats(pid_t pid);

// Direct children of every thread of `pid` (/proc/<pid>/task/*/children).
std::vector<pid_t> ChildrenOf(pid_t pid);

// First process whose /proc/<pid>/comm equals `comm` (e.g. "kube-apiserver"), or -1.
pid_t FindProcess(const std::string& comm);

// Busy and total jiffies of the machine (/proc/stat "cpu" line), for a utilization over a window.
struct CpuTimes {
  unsigned long long busy = 0;
  unsigned long long total = 0;
};
CpuTimes MachineCpu();
double LoadAverage1m();

}  // namespace dra::bench
