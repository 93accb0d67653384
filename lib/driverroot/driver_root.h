#pragma once

// The NVIDIA driver installation the plugin works against, and the two views of it:
//
//   root       where the plugin sees the driver's files: "/driver-root" in the DaemonSet (the host
//              driver root mounted there), "/" for a host install seen from the host, or a test's
//              mock root;
//   host_root  where the container runtime on the host sees the same files: "/" for a host
//              install, "/run/nvidia/driver" for the GPU Operator's driver container.
//
// Discovery looks under `root`; CDI specs must name host paths, so every plugin-view path under
// `root` is rewritten to `host_root` (ToHostPath, TransformSpec) before a spec is written.
// Symbolic links inside the root are resolved inside the root: an absolute link target such as
// "/usr/lib/x" means "<root>/usr/lib/x", never the plugin container's own /usr/lib.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/cdi/spec.h"

namespace dra::driverroot {

// Library directories searched, in order, under the root (the standard multiarch and lib64
// layouts; the driver's ldcache is not parsed: directory scanning finds the same files on the
// distributions the driver supports).
extern const std::vector<std::string> kLibraryDirs;
// Binary directories searched, in order, under the root.
extern const std::vector<std::string> kBinaryDirs;

struct DriverRootOptions {
  std::string root = "/";
  std::string host_root = "/";
  // Where /dev is found. Empty: `root` when "<root>/dev" is a directory, else "/".
  std::string dev_root;
  std::string proc_root = "/proc";  // e.g. "<mock root>/proc" in tests
  // The file read for the character device majors instead of "<proc_root>/devices", for nodes
  // whose kernel lacks the NVIDIA entries (simulated GPUs); the public driver's
  // ALT_PROC_DEVICES_PATH. Empty: "<proc_root>/devices". Must be absolute when set.
  std::string proc_devices;
  std::string sys_root = "/sys";
};

// Thread-safety: immutable after Create; every method may be called from any thread.
class DriverRoot {
 public:
  using Options = DriverRootOptions;

  // Fails (InvalidArgument/NotFound) unless root and dev_root are existing directories and every
  // root is an absolute path. Trailing slashes are dropped.
  static absl::StatusOr<std::unique_ptr<DriverRoot>> Create(Options options);

  const std::string& root() const { return options_.root; }
  const std::string& host_root() const { return options_.host_root; }
  const std::string& dev_root() const { return options_.dev_root; }
  const std::string& proc_root() const { return options_.proc_root; }
  // The file that stands for /proc/devices (DriverRootOptions::proc_devices).
  const std::string& proc_devices() const { return options_.proc_devices; }
  const std::string& sys_root() const { return options_.sys_root; }

  // The plugin-view path of an absolute path inside the root: "/usr/bin/x" -> "<root>/usr/bin/x".
  std::string Path(absl::string_view in_root) const;
  // The plugin-view path of an absolute path under the dev root: "/dev/x" -> "<dev root>/dev/x".
  std::string DevPath(absl::string_view in_dev_root) const;

  // Resolves every symbolic link of `in_root` (an absolute path inside the root) inside the root
  // and returns the resulting path inside the root. NotFound when a component does not exist (or
  // a non-final component is not a directory);
  // InvalidArgument after 40 links (a loop).
  absl::StatusOr<std::string> Resolve(absl::string_view in_root) const;

  // The first of "/" + kLibraryDirs holding `name` that resolves to a regular file, as a
  // plugin-view path with links resolved (what dlopen should load), e.g.
  // FindLibrary("libnvidia-ml.so.1") ->
  // "<root>/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15".
  absl::StatusOr<std::string> FindLibrary(absl::string_view name) const;
  // The first of kBinaryDirs (then "/opt/bin") holding `name` that resolves to an executable
  // regular file, as a plugin-view path with links resolved inside the root (an absolute link
  // such as /bin -> /usr/bin in the driver root must not lead to the plugin image's own files).
  absl::StatusOr<std::string> FindBinary(absl::string_view name) const;

  // The host view of a plugin-view path: under `root` -> under `host_root`; others unchanged.
  std::string ToHostPath(absl::string_view plugin_path) const;
  // cdi::TransformRoot from `root` to `host_root` over the whole spec.
  void TransformSpec(cdi::Spec& spec) const;

 private:
  explicit DriverRoot(Options options) : options_(std::move(options)) {}

  Options options_;
};

}  // namespace dra::driverroot
