#include "lib/common/stack_dump.h"

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"

namespace dra {
namespace {

constexpr int kMaxFrames = 64;
constexpr int kMaxThreads = 256;

struct Slot {
  std::atomic<pid_t> tid{0};
  std::atomic<int> frames{0};  // -1 while not yet written
  void* pcs[kMaxFrames];
};
Slot g_slots[kMaxThreads];
std::atomic<int> g_next{0};

int DumpSignal() { return SIGRTMIN + 3; }

// Async-signal-safe: backtrace() after warm-up, atomics, gettid.
void OnDumpSignal(int) {
  int i = g_next.fetch_add(1);
  if (i >= kMaxThreads) return;
  Slot& s = g_slots[i];
  s.tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
  int n = ::backtrace(s.pcs, kMaxFrames);
  s.frames.store(n, std::memory_order_release);
}

std::vector<pid_t> ThreadIds() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  ::closedir(d);
  return out;
}

}  // namespace

void InstallStackDumpHandler() {
  void* warm[2];
  ::backtrace(warm, 2);  // loads libgcc's unwinder now, not inside a signal handler
  struct sigaction sa {};
  sa.sa_handler = OnDumpSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(DumpSignal(), &sa, nullptr);
}

absl::Status DumpAllThreadStacks(const std::string& path, int* threads_dumped) {
  for (auto& s : g_slots) {
    s.tid.store(0);
    s.frames.store(-1);
  }
  g_next.store(0);
  std::vector<pid_t> tids = ThreadIds();
  const pid_t pid = ::getpid();
  for (pid_t tid : tids) ::syscall(SYS_tgkill, pid, tid, DumpSignal());
  // Threads blocked in the kernel answer as soon as the signal interrupts them.
  absl::Time deadline = absl::Now() + absl::Seconds(2);
  while (g_next.load() < static_cast<int>(tids.size()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  int answered = std::min(g_next.load(), kMaxThreads);
  std::string text = absl::StrCat("thread stacks of pid ", pid, " (", answered, " of ", tids.size(),
                                  " threads answered)\n");
  for (int i = 0; i < answered; ++i) {
    Slot& s = g_slots[i];
    int n = s.frames.load(std::memory_order_acquire);
    if (n < 0) continue;
    absl::StrAppend(&text, "\nthread ", s.tid.load(), ":\n");
    char** symbols = ::backtrace_symbols(s.pcs, n);
    // Frame 0-1 are the handler and the signal trampoline.
    for (int f = 2; f < n; ++f) {
      absl::StrAppend(&text, "  #", f - 2, " ", symbols ? symbols[f] : "?", "\n");
    }
    std::free(symbols);
  }
  if (threads_dumped != nullptr) *threads_dumped = answered;
  return WriteFileAtomically(path, text, 0600);
}

}  // namespace dra
