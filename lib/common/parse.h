#pragma once

// Small parsers shared by flags and feature gates, with Go's semantics so that values users
// already pass to the Go driver keep working.

#include "absl/strings/string_view.h"

namespace dra {

// Go's strconv.ParseBool: true for 1 t T TRUE true True, false for 0 f F FALSE false False;
// anything else (including surrounding whitespace) returns false and leaves *out unchanged.
bool ParseGoBool(absl::string_view text, bool* out);

}  // namespace dra
