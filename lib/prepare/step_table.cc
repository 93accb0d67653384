#include "lib/prepare/step_table.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace dra::prepare {
namespace {

std::string Cell(std::string_view text) {
  return absl::StrReplaceAll(std::string(text), {{"|", "\\|"}, {"\n", " "}});
}

const char* YesNo(bool b) { return b ? "yes" : "no"; }

}  // namespace

std::string RenderStepDocs(const std::vector<StepDocRow>& rows) {
  std::string out =
      "| Step | In the plan | External | Resumable | Best effort | Apply | Undo |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const StepDocRow& row : rows) {
    std::vector<std::string> names;
    for (std::string_view name : row.names) names.push_back("`" + std::string(name) + "`");
    absl::StrAppend(&out, "| ", absl::StrJoin(names, ", "), " | ", Cell(row.doc.when), " | ",
                    YesNo(row.doc.external), " | ", YesNo(row.doc.resumable), " | ",
                    YesNo(row.doc.best_effort), " | ", Cell(row.doc.apply), " | ",
                    Cell(row.doc.undo), " |\n");
  }
  return out;
}

absl::Status CheckStepNames(const std::vector<StepDocRow>& rows) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].names.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("step kind ", i, ": no names"));
    }
    for (std::string_view name : rows[i].names) {
      if (name.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("step kind ", i, ": an empty name"));
      }
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("step kind ", i, ": name \"", std::string(name), "\" is used twice"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace dra::prepare
