#pragma once

// Rewrites host paths of CDI edits from the driver root as the plugin sees it (the container
// driver root, e.g. "/driver-root") to the driver root as the runtime on the host sees it (the
// host driver root, e.g. "/" or "/run/nvidia/driver"). The plugin discovers files under its own
// mount; the runtime that reads the spec resolves paths in the host's mount namespace.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/cdi/spec.h"

namespace dra::cdi {

// When `path` is `from` or lies below it (whole path components: "/driver-root/x" is below
// "/driver-root", "/driver-rootx" is not), returns it with that prefix replaced by `to`;
// otherwise nullopt. Trailing slashes of `from`/`to` are ignored; "/" as `from` matches every
// absolute path. Examples, from "/driver-root":
//   to "/":                  "/driver-root/usr/lib/x.so" -> "/usr/lib/x.so", "/driver-root" -> "/"
//   to "/run/nvidia/driver": "/driver-root/usr/lib/x.so" -> "/run/nvidia/driver/usr/lib/x.so"
std::optional<std::string> RewritePathPrefix(absl::string_view path, absl::string_view from,
                                             absl::string_view to);

// Rewrites every host-side path of `edits` that lies under `from`: device node hostPath (an empty
// hostPath means "same as path" and is rewritten from path; it stays empty when path is not under
// `from`), mount hostPath and hook path. Container-side paths are untouched. No-op when `from` and
// `to` name the same directory.
void TransformRoot(ContainerEdits& edits, absl::string_view from, absl::string_view to);
// The same over the spec-level and every device's edits.
void TransformRoot(Spec& spec, absl::string_view from, absl::string_view to);

}  // namespace dra::cdi
