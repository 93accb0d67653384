#pragma once

// Exponential backoff with jitter for retry loops:
//
//   dra::Backoff backoff({.initial = absl::Milliseconds(100), .max = absl::Seconds(30)});
//   while (!(s = TryOnce()).ok()) clock->SleepFor(backoff.Next());
//
// The n-th delay (n = 0, 1, ...) is base(n) = min(initial * factor^n, max), scaled by a random
// factor in [1 - jitter, 1 + jitter] and then capped at max again. So every delay lies in
// [base(n) * (1 - jitter), min(base(n) * (1 + jitter), max)].

#include <functional>

#include "absl/time/time.h"

namespace dra {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(30);
  double factor = 2.0;
  double jitter = 0.1;  // fraction of the delay, in [0, 1]
};

// Thread-safety: not thread-safe; one Backoff per retry loop.
class Backoff {
 public:
  // Returns uniformly distributed numbers in [0, 1).
  using RandomSource = std::function<double()>;

  // Out-of-range options are clamped: initial to at least 1ns, max to at least initial, factor
  // to at least 1, jitter to [0, 1]. `random` defaults to a seeded std::mt19937_64.
  explicit Backoff(BackoffOptions options = {}, RandomSource random = nullptr);

  // The delay to wait before the next attempt; grows until it reaches max.
  absl::Duration Next();
  // Starts over at `initial` (call after a success).
  void Reset();
  // How many times Next was called since construction or Reset.
  int attempts() const { return attempts_; }
  const BackoffOptions& options() const { return options_; }

 private:
  BackoffOptions options_;
  RandomSource random_;
  absl::Duration base_;
  int attempts_ = 0;
};

}  // namespace dra
