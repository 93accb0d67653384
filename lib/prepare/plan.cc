#include "lib/prepare/plan.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/common/trace.h"

namespace dra::prepare {
namespace {

// `original` (code, payloads) with the undo error appended to its message.
absl::Status WithUndoError(const absl::Status& original, const absl::Status& undo) {
  if (undo.ok()) return original;
  absl::Status out(
      original.code(),
      absl::StrCat(original.message(),
                   "; undoing the steps applied before it failed too: ", undo.message()));
  original.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

// The first `n` of `records`.
std::vector<StepRecord> Prefix(const std::vector<StepRecord>& records, size_t n) {
  return {records.begin(), records.begin() + static_cast<std::ptrdiff_t>(n)};
}

// Positions in `steps` of the records `steps` repeats, from the front of `recorded`, in order.
std::vector<size_t> RepeatedPositions(const std::vector<StepRecord>& recorded,
                                      const PlanSteps& steps) {
  std::vector<size_t> positions;
  size_t next = 0;
  for (const StepRecord& r : recorded) {
    std::optional<size_t> found;
    for (size_t p = next; p < steps.size() && !found; ++p) {
      if (steps[p]->name() == r.name && steps[p]->UndoData() == r.undo) found = p;
    }
    if (!found) break;
    positions.push_back(*found);
    next = *found + 1;
  }
  return positions;
}

}  // namespace

const char* StepStateName(StepState state) {
  return state == StepState::kApplied ? "applied" : "begun";
}

nlohmann::json StepRecordsToJson(const std::vector<StepRecord>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const StepRecord& r : records) {
    nlohmann::json j = {{"name", r.name}, {"state", StepStateName(r.state)}};
    if (!r.undo.is_null()) j["undo"] = r.undo;
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<std::vector<StepRecord>> RecordedStepsOrNone(const nlohmann::json& j,
                                                           const std::string& claim_uid) {
  if (j.is_null()) return std::nullopt;
  absl::StatusOr<std::vector<StepRecord>> steps = StepRecordsFromJson(j);
  if (steps.ok()) return *std::move(steps);
  DRA_WARNING("unreadable step record; deriving the steps from the recorded devices", "claim",
              claim_uid, "err", steps.status());
  return std::nullopt;
}

absl::StatusOr<std::vector<StepRecord>> StepRecordsFromJson(const nlohmann::json& j) {
  if (!j.is_array()) return absl::InvalidArgumentError("steps: expected a list");
  std::vector<StepRecord> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    const std::string path = absl::StrCat("steps[", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(path + ": expected an object");
    StepRecord r;
    auto name = e.find("name");
    if (name == e.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return absl::InvalidArgumentError(path + ".name: expected a non-empty string");
    }
    r.name = name->get<std::string>();
    auto state = e.find("state");
    if (state == e.end() || !state->is_string() || (*state != "begun" && *state != "applied")) {
      return absl::InvalidArgumentError(path + ".state: expected \"begun\" or \"applied\"");
    }
    r.state = *state == "applied" ? StepState::kApplied : StepState::kBegun;
    if (auto undo = e.find("undo"); undo != e.end()) r.undo = *undo;
    out.push_back(std::move(r));
  }
  return out;
}

size_t StepEngine::RepeatedPrefix(const std::vector<StepRecord>& recorded, const PlanSteps& steps) {
  return RepeatedPositions(recorded, steps).size();
}

absl::Status StepEngine::UndoOne(const StepRecord& record) const {
  auto it = undoers_->find(record.name);
  if (it == undoers_->end()) {
    return absl::FailedPreconditionError(absl::StrCat("no undo is known for step \"", record.name,
                                                      "\" (recorded by a newer plugin?)"));
  }
  TraceStage stage(CallTrace::Active() ? CallTrace::Intern(record.name + "Undo") : "");
  return it->second(record.undo);
}

absl::Status StepEngine::UndoInReverse(const std::vector<StepRecord>& records,
                                       bool forget_when_done) {
  for (size_t i = records.size(); i-- > 0;) {
    absl::Status s = UndoOne(records[i]);
    if (s.ok()) {
      DRA_VLOG(2, "undid prepare step", "step", records[i].name);
      continue;
    }
    // The failed step and the ones before it stay for a later unprepare or cleanup.
    const absl::Status w = journal_->Started(Prefix(records, i + 1));
    if (!w.ok()) s = Annotate(s, absl::StrCat("record the steps left (", w.message(), ")"));
    return s;
  }
  return forget_when_done ? journal_->Forget() : absl::OkStatus();
}

absl::Status StepEngine::UndoAll(const std::vector<StepRecord>& recorded) {
  return UndoInReverse(recorded, /*forget_when_done=*/false);
}

absl::Status StepEngine::Run(const std::vector<StepRecord>& recorded, PlanSteps& steps,
                             const Deadline& deadline) {
  const std::vector<size_t> repeated = RepeatedPositions(recorded, steps);
  // The recorded steps the plan does not repeat go first (after them, the kept prefix stays).
  if (repeated.size() < recorded.size()) {
    for (size_t i = recorded.size(); i-- > repeated.size();) {
      absl::Status s = UndoOne(recorded[i]);
      if (s.ok()) continue;
      s = Annotate(s, "roll back partial prepare");
      const absl::Status w = journal_->Started(Prefix(recorded, i + 1));
      if (!w.ok()) s = Annotate(s, absl::StrCat("record the steps left (", w.message(), ")"));
      return s;
    }
  }
  // slots[i]: the record of steps[i], when there is one.
  std::vector<std::optional<StepRecord>> slots(steps.size());
  for (size_t k = 0; k < repeated.size(); ++k) slots[repeated[k]] = recorded[k];
  auto current = [&slots] {
    std::vector<StepRecord> out;
    for (const std::optional<StepRecord>& s : slots) {
      if (s) out.push_back(*s);
    }
    return out;
  };
  bool has_entry = !recorded.empty();
  // Step i failed with `error`; `changed_nothing` when its Apply left nothing behind.
  auto fail = [&](size_t i, const absl::Status& error, bool changed_nothing) {
    if (!changed_nothing) {
      DRA_INFO("prepare step failed; it and the steps before it stay recorded for the retry",
               "step", steps[i]->name(), "err", error);
      return error;
    }
    slots[i].reset();
    const std::vector<StepRecord> applied = current();
    if (applied.empty() && !has_entry) return error;
    const absl::Status undo = UndoInReverse(applied, /*forget_when_done=*/true);
    if (undo.ok()) {
      DRA_INFO("prepare step failed; undid the steps applied before it", "step", steps[i]->name(),
               "undone", applied.size());
    }
    return WithUndoError(error, undo);
  };
  // The best-effort tail: recorded with the completion, run after it.
  size_t tail = steps.size();
  while (tail > 0 && steps[tail - 1]->best_effort()) --tail;
  for (size_t i = 0; i < tail; ++i) {
    PlanStep& step = *steps[i];
    if (step.external()) {
      slots[i] = StepRecord{step.name(), StepState::kBegun, step.UndoData()};
      const absl::Status w = journal_->Started(current());
      if (!w.ok()) return fail(i, Annotate(w, "record step " + step.name()), true);
      has_entry = true;
    }
    absl::Status s;
    {
      TraceStage stage(CallTrace::Active() ? CallTrace::Intern(step.name() + "Step") : "");
      s = step.Apply(deadline);
    }
    if (!s.ok()) return fail(i, s, !step.resumable());
    slots[i] = StepRecord{step.name(), StepState::kApplied, step.UndoData()};
  }
  for (size_t i = tail; i < steps.size(); ++i) {
    slots[i] = StepRecord{steps[i]->name(), StepState::kApplied, steps[i]->UndoData()};
  }
  // A failure here leaves the record Started (or none, when no step before was external): the
  // retry finishes, unprepare undoes; the tail has not run.
  RETURN_IF_ERROR(journal_->Completed(current()));
  for (size_t i = tail; i < steps.size(); ++i) {
    PlanStep& step = *steps[i];
    absl::Status s;
    {
      TraceStage stage(CallTrace::Active() ? CallTrace::Intern(step.name() + "Step") : "");
      s = step.Apply(deadline);
    }
    // Not the contract; the claim is prepared all the same, and the record's Undo covers it.
    if (!s.ok()) DRA_WARNING("best-effort prepare step failed", "step", step.name(), "err", s);
  }
  return absl::OkStatus();
}

}  // namespace dra::prepare
