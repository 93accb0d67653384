#pragma once

// Turns discovered driver files and device nodes into CDI container edits. The host paths in the
// result are plugin-view paths (under DriverRoot::root()); DriverRoot::TransformSpec rewrites
// them to the host driver root once the whole spec is assembled.
//
// No hooks: we ship no nvidia-cdi-hook. The ldcache update it would do is not needed because the
// libraries and their soname links are mounted at the standard library paths the dynamic loader
// searches anyway (see discovery.h); its symlink creation is covered by mounting the links.

#include <string>
#include <vector>

#include "lib/cdi/spec.h"
#include "lib/driverroot/device_nodes.h"
#include "lib/driverroot/discovery.h"

namespace dra::driverroot {

// Mount options of libraries, firmware and binaries: read-only.
extern const std::vector<std::string> kReadOnlyMountOptions;  // ro,nosuid,nodev,rbind,rprivate
// Mount options of IPC sockets and the MPS directory: writable, never executable.
extern const std::vector<std::string> kIpcMountOptions;  // nosuid,nodev,rbind,rprivate,noexec

// {path, hostPath (only when it differs from path), type, major, minor, fileMode, permissions
// "rwm", uid, gid (when known)}.
cdi::DeviceNode ToCdiDeviceNode(const DeviceNodeInfo& node);

// Device nodes only, in order.
cdi::ContainerEdits DeviceNodeEdits(const std::vector<DeviceNodeInfo>& nodes);

// The spec-level edits every GPU container gets:
//   env          NVIDIA_CTK_LIBCUDA_DIR=<libcuda dir> when libcuda was found;
//   deviceNodes  the control devices;
//   mounts       libraries, firmware and binaries (kReadOnlyMountOptions), then IPC
//                (kIpcMountOptions), each at its container path;
//   additionalGids  the group of each control device that is not read-write for others (so that
//                a non-root container user can still open it), sorted, without 0.
cdi::ContainerEdits CommonEdits(const DriverFiles& files);

}  // namespace dra::driverroot
