#include "lib/common/backoff.h"

#include <algorithm>
#include <memory>
#include <random>
#include <utility>

namespace dra {

Backoff::Backoff(BackoffOptions options, RandomSource random)
    : options_(options), random_(std::move(random)) {
  options_.initial = std::max(options_.initial, absl::Nanoseconds(1));
  options_.max = std::max(options_.max, options_.initial);
  // Written as negated comparisons so that NaN is clamped too.
  if (!(options_.factor >= 1.0)) options_.factor = 1.0;
  if (!(options_.jitter >= 0.0)) options_.jitter = 0.0;
  if (!(options_.jitter <= 1.0)) options_.jitter = 1.0;
  if (!random_) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    random_ = [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
  }
  base_ = options_.initial;
}

absl::Duration Backoff::Next() {
  const absl::Duration base = base_;
  ++attempts_;
  // Grow for next time; once at max, stay there (no overflow however many attempts).
  base_ = base_ >= options_.max ? options_.max : std::min(base_ * options_.factor, options_.max);

  double r = random_();
  if (!(r >= 0.0 && r <= 1.0)) r = 0.5;  // a broken source gets no jitter rather than chaos
  const double scale = 1.0 + options_.jitter * (2.0 * r - 1.0);
  return std::clamp(base * scale, absl::ZeroDuration(), options_.max);
}

void Backoff::Reset() {
  base_ = options_.initial;
  attempts_ = 0;
}

}  // namespace dra
