// The step table helpers (step_table.h): the plan in table order, undoers from the table,
// the checks on names, the Markdown rendering.

#include "lib/prepare/step_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::prepare {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

struct Input {
  bool want_b = false;
};
struct Services {
  std::vector<std::string>* log = nullptr;
};
struct Context {
  int planned = 0;
};
struct Env {
  std::vector<std::string>* log = nullptr;
  bool b_undoable = true;
};
using Kind = StepKind<Input, Services, Context, Env>;

class FakeStep final : public PlanStep {
 public:
  explicit FakeStep(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  nlohmann::json UndoData() const override { return name_ + "-data"; }
  bool external() const override { return true; }
  bool resumable() const override { return false; }
  absl::Status Apply(const Deadline&) override { return absl::OkStatus(); }

 private:
  std::string name_;
};

absl::Status LogUndo(const Env& env, const StepRecord& r) {
  env.log->push_back("undo " + r.name + " " + r.undo.dump());
  return absl::OkStatus();
}

std::vector<Kind> Table() {
  return {
      Kind{.names = {"a"},
           .doc = {.when = "always", .external = true, .apply = "make a", .undo = "remove a"},
           .plan =
               [](const Input&, const Services&, Context& c, PlanSteps& out) {
                 ++c.planned;
                 out.push_back(std::make_unique<FakeStep>("a"));
                 return absl::OkStatus();
               },
           .undo = LogUndo},
      Kind{.names = {"b1", "b2"},
           .doc = {.when = "gate B",
                   .resumable = true,
                   .best_effort = true,
                   .apply = "set b | twice",
                   .undo = "nothing"},
           .plan =
               [](const Input& in, const Services&, Context& c, PlanSteps& out) {
                 ++c.planned;
                 if (!in.want_b) return absl::OkStatus();
                 out.push_back(std::make_unique<FakeStep>("b1"));
                 out.push_back(std::make_unique<FakeStep>("b2"));
                 return absl::OkStatus();
               },
           .undo = LogUndo,
           .undo_available = [](const Env& env) { return env.b_undoable; }},
  };
}

std::vector<std::string> Names(const PlanSteps& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) out.push_back(s->name());
  return out;
}

TEST(StepTableTest, PlansEachKindInTableOrder) {
  const std::vector<Kind> table = Table();
  Context context;
  PlanSteps steps;
  ASSERT_TRUE(PlanFromTable(table, Input{.want_b = true}, Services{}, context, steps).ok());
  EXPECT_THAT(Names(steps), ElementsAre("a", "b1", "b2"));
  EXPECT_EQ(context.planned, 2);

  PlanSteps without_b;
  ASSERT_TRUE(PlanFromTable(table, Input{}, Services{}, context, without_b).ok());
  EXPECT_THAT(Names(without_b), ElementsAre("a"));
}

TEST(StepTableTest, PlanStopsAtTheFirstErrorAndReturnsItAsIs) {
  std::vector<Kind> table = Table();
  table[0].plan = [](const Input&, const Services&, Context&, PlanSteps&) {
    return absl::NotFoundError("no partition");
  };
  Context context;
  PlanSteps steps;
  absl::Status s = PlanFromTable(table, Input{.want_b = true}, Services{}, context, steps);
  EXPECT_EQ(s, absl::NotFoundError("no partition"));
  EXPECT_TRUE(steps.empty());
  EXPECT_EQ(context.planned, 0);  // the second kind was not planned
}

TEST(StepTableTest, UndoersCoverEveryNameAndPassTheRecord) {
  const std::vector<Kind> table = Table();
  std::vector<std::string> log;
  StepUndoers undoers = UndoersFromTable(table, Env{.log = &log});
  std::vector<std::string> names;
  for (const auto& [name, undo] : undoers) names.push_back(name);
  EXPECT_THAT(names, UnorderedElementsAre("a", "b1", "b2"));
  ASSERT_TRUE(undoers.at("b2")(nlohmann::json{{"k", 1}}).ok());
  ASSERT_TRUE(undoers.at("a")(nullptr).ok());
  EXPECT_THAT(log, ElementsAre("undo b2 {\"k\":1}", "undo a null"));
}

TEST(StepTableTest, AKindWhoseUndoIsUnavailableHasNoUndoer) {
  const std::vector<Kind> table = Table();
  std::vector<std::string> log;
  StepUndoers undoers = UndoersFromTable(table, Env{.log = &log, .b_undoable = false});
  EXPECT_EQ(undoers.size(), 1u);
  EXPECT_TRUE(undoers.contains("a"));
}

TEST(StepTableTest, CheckRefusesDuplicateOrEmptyNamesAndMissingFunctions) {
  EXPECT_TRUE(CheckStepTable(Table()).ok());

  std::vector<Kind> dup = Table();
  dup[1].names = {"b1", "a"};
  absl::Status s = CheckStepTable(dup);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("name \"a\" is used twice"));

  std::vector<Kind> empty = Table();
  empty[0].names = {""};
  EXPECT_THAT(CheckStepTable(empty).message(), HasSubstr("step kind 0: an empty name"));

  std::vector<Kind> none = Table();
  none[1].names = {};
  EXPECT_THAT(CheckStepTable(none).message(), HasSubstr("step kind 1: no names"));

  std::vector<Kind> no_undo = Table();
  no_undo[0].undo = nullptr;
  EXPECT_THAT(CheckStepTable(no_undo).message(), HasSubstr("step kind a: plan and undo"));
}

TEST(StepTableTest, RendersOneMarkdownRowPerKind) {
  EXPECT_EQ(StepTableMarkdown(Table()),
            "| Step | In the plan | External | Resumable | Best effort | Apply | Undo |\n"
            "|---|---|---|---|---|---|---|\n"
            "| `a` | always | yes | no | no | make a | remove a |\n"
            "| `b1`, `b2` | gate B | no | yes | yes | set b \\| twice | nothing |\n");
}

}  // namespace
}  // namespace dra::prepare
