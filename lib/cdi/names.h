#pragma once

// CDI naming rules: vendor, class and device names, "kind" (<vendor>/<class>) and fully qualified
// device IDs (<vendor>/<class>=<name>), as the runtimes' CDI parser checks them.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::cdi {

// Vendor: a letter, then [A-Za-z0-9_.-], ending in a letter or digit. At least 2 characters: the
// Go parser indexes name[1:len-1] and fails on one-character names, so we never emit them.
absl::Status ValidateVendorName(absl::string_view vendor);
// Class: same rules as the vendor. A '.' in the class needs cdiVersion 0.6.0 (see version.h).
absl::Status ValidateClassName(absl::string_view class_name);
// Device name: a letter or digit, then [A-Za-z0-9_.:-], ending in a letter or digit; one
// character is fine. A leading digit needs cdiVersion 0.5.0.
absl::Status ValidateDeviceName(absl::string_view name);

struct Kind {
  std::string vendor;
  std::string class_name;

  std::string ToString() const { return vendor + "/" + class_name; }
  friend bool operator==(const Kind&, const Kind&) = default;
};

// Splits and validates "<vendor>/<class>".
absl::StatusOr<Kind> ParseKind(absl::string_view kind);

}  // namespace dra::cdi
