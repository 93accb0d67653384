#pragma once

// Validation of a CDI spec before it is written, with the rules the runtimes apply when they load
// it (so that a spec we write is never silently dropped by containerd or CRI-O), plus a few
// stricter ones of ours: every path is absolute, every string is valid UTF-8 without NUL.
//
// Errors are InvalidArgument and name the field path, e.g.
//   "devices[1].containerEdits.mounts[0].hostPath: must be an absolute path, got \"lib/x.so\"".

#include <string>

#include "absl/status/status.h"
#include "lib/cdi/spec.h"

namespace dra::cdi {

// Checks the whole spec: cdiVersion is known and not below MinimumVersion(spec); kind; spec and
// device annotations (Kubernetes qualified-name keys, 256 KiB in total per map); at least one
// device; device names valid and unique; every device has non-empty containerEdits; and every
// ContainerEdits (see ValidateContainerEdits).
absl::Status ValidateSpec(const Spec& spec);

// Checks one set of edits; `path` prefixes the field paths in errors ("containerEdits").
//   env and hook env: "KEY=VALUE" with the '=' at index > 0;
//   deviceNodes: absolute path, absolute hostPath when set, type in {"", b, c, u, p},
//     permissions a subset of "rwm";
//   mounts: absolute hostPath and containerPath;
//   hooks: known hookName, absolute path, timeout > 0 when set.
absl::Status ValidateContainerEdits(const ContainerEdits& edits, const std::string& path);

}  // namespace dra::cdi
