#pragma once

// Finds, under a driver root, the files every GPU container needs from the host's driver: the
// content of the CDI spec-level ("common") edits.
//
// How files are found (no ldcache parsing; a directory scan finds the same files):
//   libraries  every "*.so.<driver version>" in kLibraryDirs and their "vdpau" subdirectories,
//              plus every symbolic link in those directories that resolves to one of them (the
//              soname links such as libcuda.so.1 and libnvidia-ml.so.1). Mounting the links too
//              is what makes the libraries loadable without the nvidia-cdi-hook ldcache/symlink
//              hooks: the files sit at their standard paths under their soname, which the
//              dynamic loader searches by default. A directory reached twice through links
//              (/lib64 -> /usr/lib64) is scanned once;
//   firmware   "gsp*.bin" in /lib/firmware/nvidia/<version>/ and
//   /usr/lib/firmware/nvidia/<version>/; binaries   kDriverBinaries, first hit in kBinaryDirs; IPC
//   /run (else /var/run) nvidia-persistenced/socket and nvidia-fabricmanager/socket,
//              and the /tmp/nvidia-mps directory, all under the driver root;
//   devices    the control device nodes under the dev root (device_nodes.h).
// Missing files are skipped: a driver without Fabric Manager has no fabricmanager socket.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/driverroot/device_nodes.h"
#include "lib/driverroot/driver_root.h"

namespace dra::driverroot {

extern const std::vector<std::string> kDriverBinaries;  // nvidia-smi, nvidia-debugdump, ...

struct DriverFile {
  std::string path;  // plugin view, links resolved: "<root>/usr/lib/.../libcuda.so.550.54.15"
  std::string container_path;  // where containers get it: "/usr/lib/.../libcuda.so.1"

  friend bool operator==(const DriverFile&, const DriverFile&) = default;
};

struct DriverFiles {
  std::string driver_version;
  std::vector<DriverFile> libraries;  // sorted by container_path
  std::vector<DriverFile> firmware;   // sorted by container_path
  std::vector<DriverFile> binaries;   // in kDriverBinaries order
  std::vector<DriverFile> ipc;        // persistenced socket, fabricmanager socket, MPS directory
  std::vector<DeviceNodeInfo> control_devices;
  std::string libcuda_dir;  // container-side directory of libcuda.so.<version>; empty if none
};

// The driver version from the name of "libnvidia-ml.so.<version>" (a version with a '.', so the
// soname link libnvidia-ml.so.1 does not count) in the first library directory that has one.
// NotFound when there is none.
absl::StatusOr<std::string> DetectDriverVersion(const DriverRoot& root);

// Discovers everything above. `driver_version` (e.g. from NVML) selects the libraries and the
// firmware directory; empty means DetectDriverVersion. Errors other than missing files (EACCES,
// EIO, a link loop) are returned with the path.
absl::StatusOr<DriverFiles> DiscoverDriverFiles(const DriverRoot& root,
                                                absl::string_view driver_version = "");

}  // namespace dra::driverroot
