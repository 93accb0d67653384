#pragma once

// Test helpers for code that runs against the mock NVML: build a mock driver root for a node
// profile (test/doubles/make-driver-root.sh with this build's mock library, fake nvidia-smi and
// fake nvidia-cuda-mps-control), in a temporary directory that cleans itself up, and run programs
// capturing their output.
//
// Link dra_mock_driver_root; it makes the build produce the mock library and the fakes first.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dra::testing {

std::string MakeDriverRootScript();                 // <source>/test/doubles/make-driver-root.sh
std::string MockNvmlLibraryPath();                  // the built libnvidia-ml.so.1
std::string FakeNvidiaSmiPath();                    // the built nvidia-smi
std::string FakeMpsControlPath();                   // the built nvidia-cuda-mps-control
std::string FakeNvfmLibraryPath();                  // the built fake libnvfm.so.1
std::string ProfilePath(std::string_view profile);  // <source>/test/doubles/profiles/<name>.json

// A fresh directory under $TEST_TMPDIR or /tmp, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when the program could not run or died by a signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (a path) with `argv`, `env` added to (or overriding) this process's environment.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env = {});

// Runs make-driver-root.sh `profile` `dir` (with --reset-state when `reset_state`). In ASan builds
// it also adds verify_asan_link_order=0 to ASAN_OPTIONS, so that programs this process starts with
// the mock library in LD_PRELOAD (nvidia-smi as the plugin runs it) can start. `profile` is
// a name under test/doubles/profiles ("h100-8x", "a100-mig-4x", "t4-2x", "gb200-4x", "gb10-1x",
// "h100-4x-gpu-lost", "future-arch-2x") or a path.
absl::Status MakeMockDriverRoot(std::string_view profile, const std::string& dir,
                                bool reset_state = true);

// Fabric Manager (docs/fabric-manager.md): copies the fake libnvfm.so.1 into
// <root>/usr/lib/x86_64-linux-gnu/, writes `partitions_json` ({"partitions": [{"id", "gpus"}]},
// test/doubles/fake-nvfm/fake_nvfm.cc) as its partitions and forgets any active state; and, when
// `host_root` is not empty, an NVSwitch entry under <host_root>/proc/driver/nvidia-nvswitch/devices
// so that fabric detection finds one.
absl::Status InstallFakeFabricManager(const std::string& root, const std::string& partitions_json,
                                      const std::string& host_root = "");

}  // namespace dra::testing
