#pragma once

// A per-call stage trace: where the time of one call (a NodePrepareResources) goes, as one klog
// line per call, for finding and measuring the hot path (docs/performance.md).
//
//   CallTrace trace("prepare trace", trace_enabled);   // on the thread that serves the call
//   { TraceStage s("claimFetch"); ...; }               // anywhere below, on the same thread
//   trace.Note("claims", 1);
//   // ~CallTrace logs: "prepare trace" totalUs=812 claimFetchUs=20 checkpointWriteUs=95
//   //                   checkpointWriteN=1 ... claims=1
//
// A stage adds its wall time (microseconds) to the innermost CallTrace active on its thread and
// counts how often it ran ("<stage>N" is logged when it ran more than once); stages of the same
// name add up. Without an active trace, or when the trace is off, TraceStage costs one
// thread-local read and no clock read. Stages may nest; their times then overlap (each is
// logged as measured). Keys keep the order in which stages first ended (a stage after those it
// encloses).
//
// Thread-safety: each trace belongs to the thread that made it; work done on other threads (a
// background unlink) is not counted.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dra {

class CallTrace {
 public:
  // `enabled` false makes the whole object inert (no clock reads, no line).
  CallTrace(const char* message, bool enabled);
  ~CallTrace();  // logs the line (when enabled) and deactivates the trace
  CallTrace(const CallTrace&) = delete;
  CallTrace& operator=(const CallTrace&) = delete;

  // A number logged after the stages under `key` (e.g. the claim count, a request id).
  void Note(const char* key, int64_t value);
  // Adds `n` to the note `key` (a string literal) of the thread's current trace, if any.
  static void CountInCurrent(const char* key, int64_t n = 1);
  // Adds `d` to stage `name` of the thread's current trace, if any.
  static void AddToCurrent(const char* name, absl::Duration d);
  // Whether this thread has an enabled trace (a stage is worth timing).
  static bool Active();
  // A stage name with static storage for a name made at run time (a step's); names are few.
  static const char* Intern(const std::string& name);

 private:
  struct Stage {
    const char* name;
    absl::Duration total;
    int count;
  };
  const char* const message_;
  const bool enabled_;
  const absl::Time start_;
  CallTrace* const outer_;
  std::vector<Stage> stages_;
  std::vector<std::pair<const char*, int64_t>> notes_;
};

// Times the enclosing scope as stage `name` (a string literal) of the thread's trace.
class TraceStage {
 public:
  explicit TraceStage(const char* name)
      : name_(name), start_(CallTrace::Active() ? absl::Now() : absl::InfinitePast()) {}
  ~TraceStage() {
    if (start_ != absl::InfinitePast()) CallTrace::AddToCurrent(name_, absl::Now() - start_);
  }
  TraceStage(const TraceStage&) = delete;
  TraceStage& operator=(const TraceStage&) = delete;

 private:
  const char* const name_;
  const absl::Time start_;
};

}  // namespace dra
