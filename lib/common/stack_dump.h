#pragma once

// Thread-stack dumps for live debugging (SIGUSR2 on our daemons, like the Go driver's goroutine
// dump): every thread of the process records its own program counters from a signal handler
// (async-signal-safe: backtrace() after warm-up, atomics, no malloc), and the caller, a normal
// thread, symbolizes them in-process and writes them all to a file, one line per frame:
//
//   #3 0x55d0c2a41b7e dra::gpu::DeviceState::Prepare() (gpu-kubelet-plugin+0x241b7e)
//
// The name comes from the binary's symbol table (absl::Symbolize, demangled); "??" when there is
// none (a stripped binary, JIT code). The module and offset are always there, for addr2line.
// Frames after the first are return addresses and are named by the call before them.
//
// Thread-safety: DumpAllThreadStacks may be called from one thread at a time (the signal thread);
// it signals the others with SIGRTMIN+3, which nothing else in the process may use.

#include <string>

#include "absl/status/status.h"

namespace dra {

// Prepares in-process symbolization (absl::InitializeSymbolizer). Call once from main with argv[0],
// before other threads start, in every binary that installs the dump.
void InitializeStackDumpSymbolizer(const char* argv0);

// Installs the per-thread handler and warms up backtrace() so that the handler does not load
// libgcc lazily. Call once at startup, before DumpAllThreadStacks.
void InstallStackDumpHandler();

// Writes the stacks of all threads to `path` (mode 0600: stacks can show claim data; replaced
// atomically) and returns how many threads answered within a short timeout.
absl::Status DumpAllThreadStacks(const std::string& path, int* threads_dumped = nullptr);

}  // namespace dra
