#pragma once

// Thread-stack dumps for live debugging (SIGUSR2 on our daemons, like the Go driver's goroutine
// dump): every thread of the process records its own backtrace from a signal handler, and the
// caller writes them all, symbolized, to a file.
//
// Thread-safety: DumpAllThreadStacks may be called from one thread at a time (the signal thread);
// it signals the others with SIGRTMIN+3, which nothing else in the process may use.

#include <string>

#include "absl/status/status.h"

namespace dra {

// Installs the per-thread handler and warms up backtrace() so that the handler does not load
// libgcc lazily. Call once at startup, before DumpAllThreadStacks.
void InstallStackDumpHandler();

// Writes the stacks of all threads to `path` (mode 0600: stacks can show claim data; replaced
// atomically) and returns how many threads answered within a short timeout.
absl::Status DumpAllThreadStacks(const std::string& path, int* threads_dumped = nullptr);

}  // namespace dra
