#pragma once

// Markdown table cells for the generated reference (docs/reference.md, hack/gen-reference.sh).

#include <string>

#include "absl/strings/string_view.h"

namespace dra {

// `text` as the content of one Markdown table cell: "|" escaped, line breaks as "<br>", leading
// and trailing whitespace of each line dropped, empty lines skipped.
std::string MarkdownCell(absl::string_view text);

}  // namespace dra
