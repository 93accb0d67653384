#pragma once

// cdiVersion values and the lowest version that supports a spec's content. Runtimes reject a
// version they do not know, so we write the minimum rather than the newest.

#include <string>

#include "absl/strings/string_view.h"
#include "lib/cdi/spec.h"

namespace dra::cdi {

// The newest version this library knows.
inline constexpr absl::string_view kCurrentVersion = "1.1.0";
// The oldest version still accepted by the runtimes' CDI library, and our floor.
inline constexpr absl::string_view kEarliestVersion = "0.3.0";

// True for the released versions 0.1.0 .. 0.8.0, 1.0.0, 1.1.0.
bool IsKnownVersion(absl::string_view version);

// Orders "X.Y.Z" strings numerically; <0, 0, >0 like strcmp. Unparsable parts compare as 0.
int CompareVersions(absl::string_view a, absl::string_view b);

struct RequiredVersion {
  std::string version;  // the lowest version that supports everything in the spec
  std::string reason;   // the field path (or rule) that forced it; empty for kEarliestVersion
};

// The lowest cdiVersion that supports `spec`'s content (the declared spec.version is ignored):
//   0.4.0  a mount has a type
//   0.5.0  a device node has a hostPath, or a device name starts with a digit
//   0.6.0  spec or device annotations, or a '.' in the class part of kind
//   0.7.0  additionalGids (spec or device level)
// (0.7.0's intelRdt and 1.1.0's netDevices are not modelled.)
RequiredVersion MinimumVersion(const Spec& spec);

}  // namespace dra::cdi
