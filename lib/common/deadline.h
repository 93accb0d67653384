#pragma once

// The time by which a caller needs an answer (the kubelet's gRPC deadline of a NodePrepareResources
// call), handed down through the steps of one operation so that each step waits at most the time
// that is left instead of a fixed timeout of its own:
//
//   const Deadline deadline(call.deadline, "prepare of claim " + uid);
//   RETURN_IF_ERROR(deadline.Check("write the CDI spec"));  // not begun once it has passed
//   RunProgram(argv, {.timeout = deadline.Cap(absl::Seconds(30))});
//
// Work finished after the deadline is wasted: the caller has given up and will retry. Checking
// before a step (rather than stopping one half-way) keeps every step whole, so an operation cut
// short by its deadline leaves what an ordinary failure of that step would leave.
//
// Thread-safety: an immutable value; any thread. The clock must outlive the Deadline.

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/common/clock.h"

namespace dra {

class Deadline {
 public:
  // No deadline: every step keeps its own fixed bound.
  static Deadline Infinite() { return Deadline(absl::InfiniteFuture(), ""); }

  // `what` names the operation in errors ("prepare of claim <uid>").
  Deadline(absl::Time at, std::string what, Clock* clock = RealClock::Get())
      : at_(at), what_(std::move(what)), clock_(clock) {}

  absl::Time at() const { return at_; }
  const std::string& what() const { return what_; }
  bool infinite() const { return at_ == absl::InfiniteFuture(); }

  // The time left, never negative; absl::InfiniteDuration() without a deadline.
  absl::Duration Left() const {
    if (infinite()) return absl::InfiniteDuration();
    return std::max(at_ - clock_->Now(), absl::ZeroDuration());
  }

  // What a step with its own bound `fixed` may wait: the shorter of `fixed` and the time left.
  absl::Duration Cap(absl::Duration fixed) const { return std::min(fixed, Left()); }

  // The earlier of `at()` and `fixed_end` (a step's own end, such as a readiness timeout).
  absl::Time CapTime(absl::Time fixed_end) const { return std::min(fixed_end, at_); }

  // OK while time is left; once it has passed, DeadlineExceeded naming the operation and the step
  // that was not begun: "prepare of claim <uid>: <step>: not begun, the caller's deadline passed
  // 1.5s ago".
  absl::Status Check(absl::string_view step) const {
    if (infinite()) return absl::OkStatus();
    const absl::Time now = clock_->Now();
    if (now < at_) return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(what_, ": ", step,
                                                    ": not begun, the caller's deadline passed ",
                                                    absl::FormatDuration(now - at_), " ago"));
  }

 private:
  absl::Time at_;
  std::string what_;
  Clock* clock_;
};

}  // namespace dra
