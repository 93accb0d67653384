#pragma once

// Running the driver root's nvidia-smi (docs/sharing.md "What the plugin runs"): the binary is
// looked up under the container driver root on every call, and runs with LD_PRELOAD=<the driver
// root's libnvidia-ml.so.1> so that it talks to the host's driver through the same library the
// plugin loads, not to one of the plugin image.
//
// RunProgram is the process runner underneath: fork/exec through posix_spawn, never a shell, with
// a time limit after which the whole process group is killed, and stdout/stderr captured (each
// capped, the tail kept).
//
// Thread-safety: RunProgram and the NvidiaSmi methods may be called from any thread.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/common/deadline.h"
#include "lib/driverroot/driver_root.h"

namespace dra::gpu {

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

class NvidiaSmi {
 public:
  // `root` must outlive this object.
  explicit NvidiaSmi(const driverroot::DriverRoot* root, absl::Duration timeout = absl::Seconds(30))
      : root_(root), timeout_(timeout) {}

  // Runs `nvidia-smi <args>`. Errors (none of them permanent: a driver hiccup may heal):
  //   NotFound  nvidia-smi or libnvidia-ml.so.1 is not in the driver root;
  //   Internal  it exited non-zero: "command \"<path> <args>\" failed with exit code N: <stderr
  //             tail, or stdout tail when stderr is empty>";
  //   DeadlineExceeded  it ran past the timeout (and was killed), or `deadline` had passed (not
  //             started). The timeout is the shorter of this runner's and the time `deadline`
  //             leaves.
  // Returns stdout on success.
  absl::StatusOr<std::string> Run(const std::vector<std::string>& args,
                                  const Deadline& deadline = Deadline::Infinite()) const;

 private:
  const driverroot::DriverRoot* const root_;
  const absl::Duration timeout_;
};

}  // namespace dra::gpu
