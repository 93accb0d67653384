#pragma once

// RunProgram: the process runner of the binaries that call host programs (nvidia-smi,
// nvidia-imex-ctl, modprobe): fork/exec through posix_spawn, never a shell, with a time limit after
// which the whole process group is killed, and stdout/stderr captured (each capped, the tail kept).
//
// Thread-safety: RunProgram and CommandLine may be called from any thread.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dra {

struct ProgramResult {
  int exit_code = -1;  // the exit status; -1 when killed by a signal
  int signal = 0;      // the signal that ended it, else 0
  std::string stdout_text;
  std::string stderr_text;
};

struct RunProgramOptions {
  // Added to (or replacing entries of) this process's environment.
  std::map<std::string, std::string> env;
  // After this the process group gets SIGKILL and the call fails with DeadlineExceeded.
  absl::Duration timeout = absl::Seconds(30);
  // Per stream; beyond it only the last `max_output_bytes` are kept.
  size_t max_output_bytes = size_t{64} * 1024;
};

// Runs argv[0] (an absolute path) with `argv`, stdin from /dev/null, in its own process group,
// with an empty signal mask and default signal dispositions. A non-zero exit is not an error here
// (see ProgramResult); errors are: the program cannot be started (NotFound, PermissionDenied, ...)
// or it ran past the timeout (DeadlineExceeded, naming the command).
absl::StatusOr<ProgramResult> RunProgram(const std::vector<std::string>& argv,
                                         const RunProgramOptions& options = {});

// "arg0 arg1 ..." for messages (arguments with spaces are quoted).
std::string CommandLine(const std::vector<std::string>& argv);

}  // namespace dra
