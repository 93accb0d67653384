#include "lib/common/markdown.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace dra {

std::string MarkdownCell(absl::string_view text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    lines.push_back(absl::StrReplaceAll(line, {{"|", "\\|"}}));
  }
  return absl::StrJoin(lines, "<br>");
}

}  // namespace dra
