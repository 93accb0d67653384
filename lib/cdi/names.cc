#include "lib/cdi/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace dra::cdi {
namespace {

bool IsLetter(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)); }
bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// Shared by vendor and class: `what` names the part in messages.
absl::Status ValidateVendorOrClass(absl::string_view what, absl::string_view s) {
  if (s.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " \"", s, "\": must be at least 2 characters"));
  }
  if (!IsLetter(s.front())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " \"", s, "\": must start with a letter"));
  }
  if (!IsAlnum(s.back())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " \"", s, "\": must end with a letter or digit"));
  }
  for (char c : s) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid ", what, " \"", s, "\": only letters, digits, '_', '.' and '-' are allowed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateVendorName(absl::string_view vendor) {
  return ValidateVendorOrClass("vendor", vendor);
}

absl::Status ValidateClassName(absl::string_view class_name) {
  return ValidateVendorOrClass("class", class_name);
}

absl::Status ValidateDeviceName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("invalid device name \"\": empty");
  if (!IsAlnum(name.front())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid device name \"", name, "\": must start with a letter or digit"));
  }
  if (!IsAlnum(name.back())) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid device name \"", name, "\": must end with a letter or digit"));
  }
  for (char c : name) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != ':' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid device name \"", name,
                       "\": only letters, digits, '_', '.', ':' and '-' are allowed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Kind> ParseKind(absl::string_view kind) {
  const size_t slash = kind.find('/');
  if (slash == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid kind \"", kind, "\": expected <vendor>/<class>"));
  }
  Kind out{std::string(kind.substr(0, slash)), std::string(kind.substr(slash + 1))};
  for (const absl::Status& s :
       {ValidateVendorName(out.vendor), ValidateClassName(out.class_name)}) {
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("invalid kind \"", kind, "\": ", s.message()));
    }
  }
  return out;
}

}  // namespace dra::cdi
