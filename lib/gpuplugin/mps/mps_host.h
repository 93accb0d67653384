#pragma once

// Host-side pieces of the MPS control daemon (mps_daemon.h): the tmpfs size from /proc/meminfo
// and the real mount operations. Internal to lib/gpuplugin/mps.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::gpu {

// The tmpfs size option value for the daemon's shm: half of MemTotal with the first letter of its
// unit ("MemTotal: 16384000 kB" -> "8192000k"); "65536k" when the file or the line is unusable.
std::string MpsShmSize(const std::string& meminfo_path);

// The tmpfs options of the daemon's shm (docs/mps.md "What the plugin creates, and where").
std::string MpsShmMountOptions(absl::string_view size);

// Whether `path` is a mount point in this process's mount namespace, from /proc/self/mountinfo
// (`mountinfo_path` for tests). The path is compared after resolving symlinks; a missing path is
// not a mount point.
absl::StatusOr<bool> IsMountPoint(const std::string& path,
                                  const std::string& mountinfo_path = "/proc/self/mountinfo");

// mount(2) of a tmpfs; `options` is a mount(8)-style list: rw, nosuid, nodev, noexec, relatime
// become flags, the rest (size=...) is passed as data.
absl::Status MountTmpfs(const std::string& source, const std::string& target,
                        const std::string& options);
// umount2(2), no flags.
absl::Status Unmount(const std::string& target);

}  // namespace dra::gpu
