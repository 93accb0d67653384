#pragma once

// Prepare as a transaction: a prepare is an ordered plan of steps, each with an Apply and an Undo,
// run by one small engine that records in the claim's checkpoint entry what may have been applied,
// so that a failure, a retried prepare, an unprepare or the cleanup can finish or undo it from the
// record alone (docs/architecture.md "Prepare as a plan of steps").
//
//   PlanSteps steps = ...;                        // e.g. lib/gpuplugin/prepare/claim_steps.h's
//   GpuClaimSteps StepEngine engine{&journal, &undoers};        // journal: the claim's checkpoint
//   entry RETURN_IF_ERROR(engine.Run(recorded, steps, deadline));   // prepare (recorded: a
//   retry's) RETURN_IF_ERROR(engine.UndoAll(recorded));                // unprepare
//
// The record is a list of StepRecord (name, state, the data its Undo needs), in plan order.
//
// Run, step by step:
//   - a step that changes something outside the plugin's own files (external()) is recorded as
//     begun, with its undo data, before its Apply starts (write-ahead): a crash during or after
//     Apply leaves a record whose Undo covers it. Undo must therefore tolerate "never applied",
//     and Apply must be idempotent (a retry repeats it). A step confined to the plugin's own files
//     (the CDI spec) is recorded with the completion only: what it leaves after a crash is found
//     without a record (the cleanup's orphan-spec sweep, unprepare's unconditional spec removal);
//   - after the last step the record is written with every step applied and the claim completed
//     (StepJournal::Completed);
//   - best_effort() steps at the end of the plan (the claim's device status: informational, a
//     failed write is the step's own warning) are recorded applied, with the claim completed, in
//     that same last write, before they run: they cannot fail, so the record is true once they
//     returned, and a crash while they run leaves a record whose Undo covers them. A plan whose
//     only external steps are such a tail is therefore recorded once per prepare (the CDI spec,
//     then one checkpoint write, then the tail) instead of twice (docs/performance.md).
//
// Journal writes, and why each is needed (docs/performance.md): Started before each external step
// that can fail (the write-ahead record that lets a crash be finished or undone; nothing else
// says that a GPU setting or a daemon exists), Completed after the last step (a retried prepare
// answers from it, unprepare works from it alone), Started again when an undo fails (what is
// left for the retry). A plan whose external steps are only a best-effort tail writes once.
//
// A failing step:
//   - a resumable() step may have done part of its work (a time-slice set on one GPU of two, an
//     MPS daemon that started but is not ready yet) which a repeated Apply completes: it stays
//     recorded as begun, and so do the steps before it (an earlier step is never undone while a
//     later one stays); the claim stays PrepareStarted and the retried prepare finishes it, or
//     unprepare or the cleanup undoes it;
//   - any other step changed nothing when it failed: every other recorded step is undone in
//     reverse order, and the claim's entry is removed once nothing remains.
//   The error is the step's own (code, message and payloads kept), followed by the undo error if
//   one occurred.
//
// A retried prepare (the claim's record is PrepareStarted) finishes, it does not start over: the
// longest prefix of the recorded steps that the new plan repeats, in order, with equal undo data,
// is kept (those steps are applied again, which completes them); the recorded steps after that
// prefix are undone first, in reverse, before anything is applied.
//
// Undo (UndoAll, and the rollbacks above) goes in reverse order and stops at the first failure:
// the failed step and the steps before it stay in the record (StepJournal::Started), so that a
// later unprepare or cleanup retries them; the error is the Undo's own (prefixed "roll back partial
// prepare: " for a retried prepare's).
//
// Thread-safety: none; the caller serializes operations on one claim (the device state's mutex).

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/common/deadline.h"
#include "nlohmann/json.hpp"

namespace dra::prepare {

enum class StepState {
  kBegun,    // Apply may have started (or finished, before the record said so)
  kApplied,  // Apply returned OK
};

// "begun" / "applied".
const char* StepStateName(StepState state);

// One step as the claim's checkpoint entry keeps it (JSON {"name", "state", "undo"}).
struct StepRecord {
  std::string name;
  StepState state = StepState::kBegun;
  nlohmann::json undo;  // what Undo needs; null when nothing

  friend bool operator==(const StepRecord&, const StepRecord&) = default;
};

nlohmann::json StepRecordsToJson(const std::vector<StepRecord>& records);
// InvalidArgument naming the element and field for anything but a list of such objects.
absl::StatusOr<std::vector<StepRecord>> StepRecordsFromJson(const nlohmann::json& j);
// The steps a claim's checkpoint entry records (its "steps" member, `j`); nullopt when it records
// none (null: written before steps were recorded, or adopted) or they do not decode (logged as a
// warning naming `claim_uid`). The caller then derives them from what else the entry records.
std::optional<std::vector<StepRecord>> RecordedStepsOrNone(const nlohmann::json& j,
                                                           const std::string& claim_uid);

// One step of a plan.
class PlanStep {
 public:
  virtual ~PlanStep() = default;
  // Stable across versions: it is recorded, and an Undo is found by it.
  virtual std::string name() const = 0;
  // What Undo needs, known before Apply (it is recorded first).
  virtual nlohmann::json UndoData() const = 0;
  // Changes something outside the plugin's own files: recorded before Apply.
  virtual bool external() const = 0;
  // A failed Apply may leave work that a repeated Apply completes (kept for the retry, above).
  virtual bool resumable() const = 0;
  // Never fails (its Apply handles its own errors and returns OK) and nothing after it depends on
  // it; its Undo tolerates "never applied". Such steps at the end of a plan run after the
  // Completed record (above). Default: false.
  virtual bool best_effort() const { return false; }
  // Idempotent. A step not begun because `deadline` passed fails with DeadlineExceeded.
  virtual absl::Status Apply(const Deadline& deadline) = 0;
};

using PlanSteps = std::vector<std::unique_ptr<PlanStep>>;

// How to undo each kind of step, by name, from its recorded undo data alone. Each must succeed
// for a step that was never applied or was undone already.
using StepUndoers = std::map<std::string, std::function<absl::Status(const nlohmann::json& undo)>>;

// Where the record lives: the claim's checkpoint entry.
class StepJournal {
 public:
  virtual ~StepJournal() = default;
  // The claim is PrepareStarted and `steps` may have been applied.
  virtual absl::Status Started(const std::vector<StepRecord>& steps) = 0;
  // Every step of `steps` was applied: PrepareCompleted.
  virtual absl::Status Completed(const std::vector<StepRecord>& steps) = 0;
  // Nothing is applied any more: the claim's entry goes.
  virtual absl::Status Forget() = 0;
};

class StepEngine {
 public:
  // Both must outlive this object.
  StepEngine(StepJournal* journal, const StepUndoers* undoers)
      : journal_(journal), undoers_(undoers) {}

  // The prepare: finishes or undoes `recorded` (the record of an unfinished earlier prepare; empty
  // for a first one) as described above, then runs `steps`. OK once Completed was recorded.
  absl::Status Run(const std::vector<StepRecord>& recorded, PlanSteps& steps,
                   const Deadline& deadline);

  // The unprepare's part: undoes `recorded` in reverse. On failure the rest is recorded
  // (Started) and the error returned; on success nothing is written (the caller forgets the claim
  // once its own part is done).
  absl::Status UndoAll(const std::vector<StepRecord>& recorded);

  // How many of `recorded`, from the front, `steps` repeats in order with equal undo data.
  static size_t RepeatedPrefix(const std::vector<StepRecord>& recorded, const PlanSteps& steps);

 private:
  // Undoes `records` in reverse. A failure records that step and those before it (Started);
  // success forgets the claim when `forget_when_done`.
  absl::Status UndoInReverse(const std::vector<StepRecord>& records, bool forget_when_done);
  absl::Status UndoOne(const StepRecord& record) const;

  StepJournal* const journal_;
  const StepUndoers* const undoers_;
};

}  // namespace dra::prepare
