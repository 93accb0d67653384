#include "lib/common/stack_dump.h"

#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/debugging/symbolize.h"
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

// One frame line: "#<n> 0x<pc> <function> (<module>+0x<offset>)". `pc` is the address to name:
// for return addresses the caller passes pc - 1, which lies in the call instruction (a call
// that ends a function would otherwise be named after the next one); `shown` is printed.
// Runs on the dumping thread, never in the signal handler (dladdr takes the loader's lock).
std::string FrameLine(int n, void* shown, const void* pc) {
  char name[1024];
  const char* function = absl::Symbolize(pc, name, sizeof(name)) ? name : "??";
  std::string line =
      absl::StrCat("  #", n, " 0x", absl::Hex(reinterpret_cast<uintptr_t>(shown)), " ", function);
  Dl_info info{};
  if (::dladdr(pc, &info) != 0 && info.dli_fname != nullptr) {
    absl::string_view module = info.dli_fname;
    if (size_t slash = module.rfind('/'); slash != absl::string_view::npos) {
      module.remove_prefix(slash + 1);
    }
    absl::StrAppend(
        &line, " (", module.empty() ? "?" : module, "+0x",
        absl::Hex(reinterpret_cast<uintptr_t>(shown) - reinterpret_cast<uintptr_t>(info.dli_fbase)),
        ")");
  }
  line += '\n';
  return line;
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

void InitializeStackDumpSymbolizer(const char* argv0) { absl::InitializeSymbolizer(argv0); }

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
    // Frames 0-1 are the handler and the signal trampoline; frame 2 is where the thread was
    // interrupted (an exact pc), the rest are return addresses.
    for (int f = 2; f < n; ++f) {
      const char* pc = static_cast<const char*>(s.pcs[f]);
      absl::StrAppend(&text, FrameLine(f - 2, s.pcs[f], f == 2 ? pc : pc - 1));
    }
  }
  if (threads_dumped != nullptr) *threads_dumped = answered;
  return WriteFileAtomically(path, text, 0600);
}

}  // namespace dra
