// The step engine (plan.h) against fake steps and an in-memory journal: order, the
// write-ahead record, rollback on failure, resumable steps, undo failures, retries.

#include "lib/prepare/plan.h"

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/log_capture.h"
#include "lib/common/status.h"

namespace dra::prepare {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// What happened, in order: "apply A", "undo A", "started [A:begun]", "completed [...]", "forget".
using Log = std::vector<std::string>;

std::string Describe(const std::vector<StepRecord>& records) {
  std::string out = "[";
  for (size_t i = 0; i < records.size(); ++i) {
    if (i > 0) out += " ";
    out += records[i].name + ":" + StepStateName(records[i].state);
  }
  return out + "]";
}

// The claim's entry, in memory.
class MemoryJournal final : public StepJournal {
 public:
  explicit MemoryJournal(Log* log) : log_(log) {}
  absl::Status Started(const std::vector<StepRecord>& steps) override {
    log_->push_back("started " + Describe(steps));
    if (!write_status.ok()) return write_status;
    record = steps;
    completed = false;
    return absl::OkStatus();
  }
  absl::Status Completed(const std::vector<StepRecord>& steps) override {
    log_->push_back("completed " + Describe(steps));
    if (!completed_status.ok()) return completed_status;
    record = steps;
    completed = true;
    return absl::OkStatus();
  }
  absl::Status Forget() override {
    log_->push_back("forget");
    record.reset();
    return absl::OkStatus();
  }
  std::optional<std::vector<StepRecord>> record;  // nullopt: no entry
  bool completed = false;
  absl::Status write_status;
  absl::Status completed_status;

 private:
  Log* log_;
};

struct FakeStepSpec {
  std::string name;
  bool external = true;
  bool resumable = false;
  nlohmann::json undo = nullptr;
  bool best_effort = false;
};

class FakeStep final : public PlanStep {
 public:
  FakeStep(FakeStepSpec spec, Log* log, const MemoryJournal* journal,
           std::map<std::string, absl::Status>* apply_status)
      : spec_(std::move(spec)), log_(log), journal_(journal), apply_status_(apply_status) {}
  std::string name() const override { return spec_.name; }
  nlohmann::json UndoData() const override { return spec_.undo; }
  bool external() const override { return spec_.external; }
  bool resumable() const override { return spec_.resumable; }
  bool best_effort() const override { return spec_.best_effort; }
  absl::Status Apply(const Deadline& deadline) override {
    log_->push_back("apply " + spec_.name);
    // Best-effort steps: where they run relative to the journal's writes is in the log.
    if (spec_.best_effort) {
      auto it = apply_status_->find(spec_.name);
      return it == apply_status_->end() ? absl::OkStatus() : it->second;
    }
    // The write-ahead rule, checked where it matters: an external step is on record as begun
    // when its Apply runs.
    if (spec_.external) {
      bool on_record = false;
      for (const StepRecord& r : journal_->record.value_or(std::vector<StepRecord>{})) {
        on_record = on_record || (r.name == spec_.name && r.state == StepState::kBegun);
      }
      EXPECT_TRUE(on_record) << spec_.name << " runs without its record";
    }
    RETURN_IF_ERROR(deadline.Check("apply " + spec_.name));
    auto it = apply_status_->find(spec_.name);
    return it == apply_status_->end() ? absl::OkStatus() : it->second;
  }

 private:
  const FakeStepSpec spec_;
  Log* const log_;
  const MemoryJournal* const journal_;
  std::map<std::string, absl::Status>* const apply_status_;
};

class StepEngineTest : public ::testing::Test {
 protected:
  PlanSteps Plan(const std::vector<FakeStepSpec>& specs) {
    PlanSteps steps;
    for (const FakeStepSpec& s : specs) {
      steps.push_back(std::make_unique<FakeStep>(s, &log_, &journal_, &apply_status_));
      undoers_[s.name] = [this, name = s.name](const nlohmann::json& undo) {
        log_.push_back("undo " + name + (undo.is_null() ? "" : " " + undo.dump()));
        auto it = undo_status_.find(name);
        return it == undo_status_.end() ? absl::OkStatus() : it->second;
      };
    }
    return steps;
  }
  absl::Status Run(PlanSteps& steps, const std::vector<StepRecord>& recorded = {}) {
    StepEngine engine(&journal_, &undoers_);
    return engine.Run(recorded, steps, Deadline::Infinite());
  }
  // The log without the journal's writes.
  Log Effects() const {
    Log out;
    for (const std::string& e : log_) {
      if (e.rfind("apply ", 0) == 0 || e.rfind("undo ", 0) == 0) out.push_back(e);
    }
    return out;
  }

  Log log_;
  MemoryJournal journal_{&log_};
  StepUndoers undoers_;
  std::map<std::string, absl::Status> apply_status_, undo_status_;
};

TEST_F(StepEngineTest, RunsInOrderRecordingExternalStepsBeforeTheyApply) {
  PlanSteps steps = Plan({{.name = "a"}, {.name = "spec", .external = false}, {.name = "b"}});
  ASSERT_TRUE(Run(steps).ok());
  EXPECT_THAT(log_, ElementsAre("started [a:begun]", "apply a", "apply spec",
                                "started [a:applied spec:applied b:begun]", "apply b",
                                "completed [a:applied spec:applied b:applied]"));
  EXPECT_TRUE(journal_.completed);
}

TEST_F(StepEngineTest, PlanOfLocalStepsOnlyWritesOnceAtTheEnd) {
  PlanSteps steps = Plan({{.name = "spec", .external = false}});
  ASSERT_TRUE(Run(steps).ok());
  EXPECT_THAT(log_, ElementsAre("apply spec", "completed [spec:applied]"));
}

// The heart of the transaction: whichever step fails, exactly the steps applied before it are
// undone, last first, and nothing is left on record.
TEST_F(StepEngineTest, FailureAtEachPositionUndoesExactlyTheAppliedStepsInReverse) {
  const std::vector<FakeStepSpec> specs = {{.name = "s0", .undo = 0},
                                           {.name = "s1", .external = false},
                                           {.name = "s2", .undo = 2},
                                           {.name = "s3", .undo = 3}};
  for (size_t k = 0; k < specs.size(); ++k) {
    SCOPED_TRACE(k);
    log_.clear();
    journal_ = MemoryJournal(&log_);
    apply_status_ = {{specs[k].name, absl::UnavailableError("boom at " + specs[k].name)}};
    PlanSteps steps = Plan(specs);
    absl::Status s = Run(steps);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(s.message(), "boom at " + specs[k].name);  // the original error, unchanged
    Log want;
    for (size_t i = 0; i <= k; ++i) want.push_back("apply " + specs[i].name);
    for (size_t i = k; i-- > 0;) {
      want.push_back("undo " + specs[i].name +
                     (specs[i].undo.is_null() ? "" : " " + specs[i].undo.dump()));
    }
    EXPECT_EQ(Effects(), want);
    EXPECT_FALSE(journal_.record.has_value()) << "entry left: " << Describe(*journal_.record);
    EXPECT_FALSE(journal_.completed);
  }
}

TEST_F(StepEngineTest, AResumableStepThatFailsStaysRecordedWithTheStepsBeforeIt) {
  apply_status_ = {{"slow", absl::UnavailableError("not ready")}};
  PlanSteps steps = Plan({{.name = "a"}, {.name = "slow", .resumable = true}, {.name = "spec"}});
  absl::Status s = Run(steps);
  EXPECT_EQ(s.message(), "not ready");
  EXPECT_THAT(Effects(), ElementsAre("apply a", "apply slow"));  // nothing undone
  ASSERT_TRUE(journal_.record.has_value());
  EXPECT_EQ(Describe(*journal_.record), "[a:applied slow:begun]");
  EXPECT_FALSE(journal_.completed);
}

// An undo that fails is reported after the original error; it and the steps before it stay on
// record, and a later unprepare (UndoAll over that record) retries them.
TEST_F(StepEngineTest, UndoFailureIsReportedAndKeepsTheStepForALaterUndo) {
  apply_status_ = {{"c", absl::InternalError("write failed")}};
  undo_status_ = {{"b", absl::DeadlineExceededError("pods still present")}};
  PlanSteps steps = Plan({{.name = "a"}, {.name = "b"}, {.name = "c", .external = false}});
  absl::Status s = Run(steps);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("write failed"));
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr(
          "write failed; undoing the steps applied before it failed too: pods still present"));
  EXPECT_THAT(Effects(), ElementsAre("apply a", "apply b", "apply c", "undo b"));  // a stays
  ASSERT_TRUE(journal_.record.has_value());
  EXPECT_EQ(Describe(*journal_.record), "[a:applied b:applied]");

  // The unprepare: b's undo fails again, then works.
  StepEngine engine(&journal_, &undoers_);
  const std::vector<StepRecord> kept = *journal_.record;
  log_.clear();
  EXPECT_THAT(std::string(engine.UndoAll(kept).message()), HasSubstr("pods still present"));
  EXPECT_EQ(Describe(*journal_.record), "[a:applied b:applied]");
  undo_status_.clear();
  log_.clear();
  ASSERT_TRUE(engine.UndoAll(*journal_.record).ok());
  EXPECT_THAT(Effects(), ElementsAre("undo b", "undo a"));
}

TEST_F(StepEngineTest, UndoAllStopsAtTheFirstFailureAndKeepsThatStepAndTheOnesBefore) {
  Plan({{.name = "a"}, {.name = "b"}, {.name = "c"}});  // registers the undoers
  undo_status_ = {{"b", absl::InternalError("stuck")}};
  const std::vector<StepRecord> recorded = {{"a", StepState::kApplied, nullptr},
                                            {"b", StepState::kApplied, nullptr},
                                            {"c", StepState::kBegun, nullptr}};
  StepEngine engine(&journal_, &undoers_);
  absl::Status s = engine.UndoAll(recorded);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "stuck");
  EXPECT_THAT(Effects(), ElementsAre("undo c", "undo b"));
  ASSERT_TRUE(journal_.record.has_value());
  EXPECT_EQ(Describe(*journal_.record), "[a:applied b:applied]");
}

// A retried prepare keeps the recorded prefix its plan repeats (applying it again completes it)
// and undoes the rest first.
TEST_F(StepEngineTest, RetryFinishesTheRepeatedPrefixAndUndoesTheRestFirst) {
  PlanSteps steps = Plan({{.name = "a", .undo = 1}, {.name = "b", .undo = 3}, {.name = "c"}});
  const std::vector<StepRecord> recorded = {{"a", StepState::kApplied, 1},
                                            {"b", StepState::kBegun, 2}};
  ASSERT_TRUE(Run(steps, recorded).ok());
  EXPECT_THAT(Effects(), ElementsAre("undo b 2", "apply a", "apply b", "apply c"));
  EXPECT_EQ(Describe(*journal_.record), "[a:applied b:applied c:applied]");
  EXPECT_EQ((*journal_.record)[1].undo, 3);
  EXPECT_EQ(StepEngine::RepeatedPrefix(recorded, steps), 1u);
}

TEST_F(StepEngineTest, RetryOfTheSamePlanUndoesNothing) {
  PlanSteps steps = Plan({{.name = "a", .undo = 1}, {.name = "spec", .external = false}});
  const std::vector<StepRecord> recorded = {{"a", StepState::kBegun, 1}};
  ASSERT_TRUE(Run(steps, recorded).ok());
  EXPECT_THAT(Effects(), ElementsAre("apply a", "apply spec"));
  EXPECT_TRUE(journal_.completed);
}

// A step recorded further down than the first mismatch is undone too, even when the plan still
// has it: an earlier step is never undone while a later one stays.
TEST_F(StepEngineTest, RetryUndoesEverythingAfterTheFirstMismatchInReverse) {
  PlanSteps steps = Plan({{.name = "a", .undo = 9}, {.name = "b", .undo = 2}});
  const std::vector<StepRecord> recorded = {{"a", StepState::kApplied, 1},
                                            {"b", StepState::kBegun, 2}};
  ASSERT_TRUE(Run(steps, recorded).ok());
  EXPECT_THAT(Effects(), ElementsAre("undo b 2", "undo a 1", "apply a", "apply b"));
}

TEST_F(StepEngineTest, RetryWhoseRollbackFailsAppliesNothingAndKeepsTheRecord) {
  PlanSteps steps = Plan({{.name = "a", .undo = 5}});
  undo_status_ = {{"a", absl::UnavailableError("nvidia-smi busy")}};
  const std::vector<StepRecord> recorded = {{"a", StepState::kBegun, 4}};
  absl::Status s = Run(steps, recorded);
  EXPECT_EQ(s.message(), "roll back partial prepare: nvidia-smi busy");
  EXPECT_THAT(Effects(), ElementsAre("undo a 4"));
  EXPECT_EQ(*journal_.record, recorded);
}

// A record from a newer plugin names a step this one cannot undo: it is never dropped.
TEST_F(StepEngineTest, UnknownRecordedStepIsKept) {
  PlanSteps steps = Plan({{.name = "a"}});
  const std::vector<StepRecord> recorded = {{"fabricPartition", StepState::kApplied, 7}};
  absl::Status s = Run(steps, recorded);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no undo is known for step \"fabricPartition\""));
  EXPECT_THAT(Effects(), IsEmpty());
  EXPECT_EQ(*journal_.record, recorded);
}

// A deadline that passes between steps fails the next one, which leaves what its failure leaves.
TEST_F(StepEngineTest, DeadlineFailsTheStepNotBegunAndUndoesTheOthers) {
  PlanSteps steps = Plan({{.name = "a"}, {.name = "spec", .external = false}});
  StepEngine engine(&journal_, &undoers_);
  absl::Status s = engine.Run({}, steps, Deadline(absl::Now() - absl::Seconds(1), "prepare x"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("prepare x: apply a: not begun"));
  EXPECT_THAT(Effects(), ElementsAre("apply a"));
  EXPECT_FALSE(journal_.record.has_value());
}

TEST_F(StepEngineTest, RecordFailureBeforeAStepUndoesTheAppliedOnes) {
  PlanSteps steps = Plan({{.name = "a"}, {.name = "b"}});
  int writes = 0;
  // The second write (b's record) fails.
  struct CountingJournal final : public StepJournal {
    MemoryJournal* inner;
    int* writes;
    absl::Status Started(const std::vector<StepRecord>& s) override {
      if (++*writes == 2) return absl::ResourceExhaustedError("disk full");
      return inner->Started(s);
    }
    absl::Status Completed(const std::vector<StepRecord>& s) override {
      return inner->Completed(s);
    }
    absl::Status Forget() override { return inner->Forget(); }
  } journal;
  journal.inner = &journal_;
  journal.writes = &writes;
  StepEngine engine(&journal, &undoers_);
  absl::Status s = engine.Run({}, steps, Deadline::Infinite());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("record step b: disk full"));
  EXPECT_THAT(Effects(), ElementsAre("apply a", "undo a"));
  EXPECT_FALSE(journal_.record.has_value());
}

TEST(StepRecordsTest, JsonRoundTripAndErrors) {
  const std::vector<StepRecord> records = {
      {"timeSlicing", StepState::kApplied, nlohmann::json::array({{{"gpus", {"GPU-1"}}}})},
      {"cdiSpec", StepState::kBegun, nullptr}};
  const nlohmann::json j = StepRecordsToJson(records);
  EXPECT_EQ(j.dump(), R"([{"name":"timeSlicing","state":"applied","undo":[{"gpus":["GPU-1"]}]},)"
                      R"({"name":"cdiSpec","state":"begun"}])");
  auto back = StepRecordsFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, records);

  EXPECT_EQ(StepRecordsFromJson(nlohmann::json::object()).status().message(),
            "steps: expected a list");
  EXPECT_EQ(
      StepRecordsFromJson(nlohmann::json::parse(R"([{"state":"applied"}])")).status().message(),
      "steps[0].name: expected a non-empty string");
  EXPECT_EQ(StepRecordsFromJson(nlohmann::json::parse(R"([{"name":"a","state":"done"}])"))
                .status()
                .message(),
            "steps[0].state: expected \"begun\" or \"applied\"");
}

TEST_F(StepEngineTest, BestEffortTailIsRecordedWithTheCompletionAndRunsAfterIt) {
  PlanSteps steps = Plan({{.name = "spec", .external = false},
                          {.name = "status", .undo = {{"claim", "c"}}, .best_effort = true}});
  ASSERT_TRUE(Run(steps).ok());
  // One journal write for the whole prepare.
  EXPECT_THAT(log_,
              ElementsAre("apply spec", "completed [spec:applied status:applied]", "apply status"));
  EXPECT_TRUE(journal_.completed);
}

TEST_F(StepEngineTest, BestEffortStepBeforeAnOrdinaryOneIsAnOrdinaryExternalStep) {
  PlanSteps steps = Plan({{.name = "status", .best_effort = true}, {.name = "b"}});
  // Not in the tail: recorded begun before it runs, like any external step.
  ASSERT_TRUE(Run(steps).ok());
  EXPECT_THAT(log_, ElementsAre("started [status:begun]", "apply status",
                                "started [status:applied b:begun]", "apply b",
                                "completed [status:applied b:applied]"));
}

TEST_F(StepEngineTest, FailedCompletionRecordSkipsTheBestEffortTail) {
  PlanSteps steps = Plan({{.name = "a"}, {.name = "status", .best_effort = true}});
  journal_.completed_status = absl::UnavailableError("disk full");
  absl::Status s = Run(steps);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Effects(), ElementsAre("apply a"));
  // The record stays as the external step left it: the retry finishes, unprepare undoes.
  ASSERT_TRUE(journal_.record.has_value());
  EXPECT_EQ(Describe(*journal_.record), "[a:begun]");
}

TEST_F(StepEngineTest, AFailingBestEffortStepStillLeavesTheClaimCompleted) {
  PlanSteps steps =
      Plan({{.name = "spec", .external = false}, {.name = "status", .best_effort = true}});
  apply_status_["status"] = absl::InternalError("not the contract");
  ASSERT_TRUE(Run(steps).ok());
  EXPECT_TRUE(journal_.completed);
  EXPECT_EQ(Describe(*journal_.record), "[spec:applied status:applied]");
}

TEST(RecordedStepsOrNoneTest, NoneForNullAndUnreadableRecordsTheStepsOtherwise) {
  EXPECT_EQ(RecordedStepsOrNone(nullptr, "uid-1"), std::nullopt);

  const std::vector<StepRecord> steps = {
      {.name = "a", .state = StepState::kApplied, .undo = {{"gpus", {"GPU-1"}}}},
      {.name = "b", .state = StepState::kBegun}};
  EXPECT_EQ(RecordedStepsOrNone(StepRecordsToJson(steps), "uid-1"), steps);

  log::LogCapture log;
  EXPECT_EQ(RecordedStepsOrNone(nlohmann::json{{"name", "not a list"}}, "uid-2"), std::nullopt);
  EXPECT_THAT(log.Text(), ::testing::HasSubstr("unreadable step record"));
  EXPECT_THAT(log.Text(), ::testing::HasSubstr("uid-2"));
}

}  // namespace
}  // namespace dra::prepare
