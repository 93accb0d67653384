#include "lib/common/parse.h"

#include <algorithm>
#include <iterator>

namespace dra {

bool ParseGoBool(absl::string_view text, bool* out) {
  static constexpr absl::string_view kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
  static constexpr absl::string_view kFalse[] = {"0", "f", "F", "FALSE", "false", "False"};
  if (std::find(std::begin(kTrue), std::end(kTrue), text) != std::end(kTrue)) {
    *out = true;
    return true;
  }
  if (std::find(std::begin(kFalse), std::end(kFalse), text) != std::end(kFalse)) {
    *out = false;
    return true;
  }
  return false;
}

}  // namespace dra
