#pragma once

// Running the driver root's nvidia-smi (docs/sharing.md "What the plugin runs"): the binary is
// looked up under the container driver root on every call, and runs with LD_PRELOAD=<the driver
// root's libnvidia-ml.so.1> so that it talks to the host's driver through the same library the
// plugin loads, not to one of the plugin image.
//
// It runs through RunProgram (lib/common/run_program.h).
//
// Thread-safety: the NvidiaSmi methods may be called from any thread.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/common/deadline.h"
#include "lib/common/run_program.h"
#include "lib/driverroot/driver_root.h"

namespace dra::gpu {

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
