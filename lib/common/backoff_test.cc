#include "lib/common/backoff.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

using ::testing::ElementsAre;

Backoff::RandomSource Constant(double r) {
  return [r] { return r; };
}

TEST(BackoffTest, GrowsByFactorUntilMaxWithoutJitter) {
  Backoff b({.initial = absl::Milliseconds(100), .max = absl::Seconds(1), .factor = 2, .jitter = 0},
            Constant(0.9));
  std::vector<absl::Duration> got;
  for (int i = 0; i < 7; ++i) got.push_back(b.Next());
  EXPECT_THAT(got, ElementsAre(absl::Milliseconds(100), absl::Milliseconds(200),
                               absl::Milliseconds(400), absl::Milliseconds(800), absl::Seconds(1),
                               absl::Seconds(1), absl::Seconds(1)));
  EXPECT_EQ(b.attempts(), 7);
}

TEST(BackoffTest, JitterScalesSymmetricallyAndMaxStillCaps) {
  struct Case {
    double r;
    absl::Duration first;
    absl::Duration at_max;
  };
  // jitter 0.5: r=0 -> x0.5, r=0.5 -> x1, r=1 -> x1.5 (capped at max).
  for (const Case& c : {Case{0.0, absl::Milliseconds(50), absl::Milliseconds(500)},
                        Case{0.5, absl::Milliseconds(100), absl::Seconds(1)},
                        Case{1.0, absl::Milliseconds(150), absl::Seconds(1)}}) {
    Backoff b(
        {.initial = absl::Milliseconds(100), .max = absl::Seconds(1), .factor = 10, .jitter = 0.5},
        Constant(c.r));
    EXPECT_EQ(b.Next(), c.first) << c.r;
    b.Next();                              // base 1s (capped)
    EXPECT_EQ(b.Next(), c.at_max) << c.r;  // base stays at max
  }
}

TEST(BackoffTest, ResetStartsOver) {
  Backoff b({.initial = absl::Seconds(1), .max = absl::Minutes(1), .factor = 3, .jitter = 0});
  b.Next();
  b.Next();
  EXPECT_EQ(b.Next(), absl::Seconds(9));
  b.Reset();
  EXPECT_EQ(b.attempts(), 0);
  EXPECT_EQ(b.Next(), absl::Seconds(1));
}

TEST(BackoffTest, RandomDelaysStayInBounds) {
  const BackoffOptions options{
      .initial = absl::Milliseconds(10), .max = absl::Seconds(5), .factor = 1.7, .jitter = 0.2};
  Backoff b(options);  // real random source
  absl::Duration base = options.initial;
  for (int i = 0; i < 200; ++i) {
    const absl::Duration d = b.Next();
    EXPECT_GE(d, base * (1 - options.jitter)) << i;
    EXPECT_LE(d, std::min(base * (1 + options.jitter), options.max)) << i;
    base = std::min(base * options.factor, options.max);
  }
}

TEST(BackoffTest, DeterministicUnderInjectedSource) {
  auto sequence = [] {
    double values[] = {0.1, 0.9, 0.4, 0.7};
    auto i = std::make_shared<int>(0);
    return [values, i]() mutable { return values[(*i)++ % 4]; };
  };
  Backoff a({}, sequence());
  Backoff b({}, sequence());
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.Next(), b.Next()) << i;
}

TEST(BackoffTest, ClampsBadOptions) {
  Backoff b({.initial = -absl::Seconds(1), .max = absl::ZeroDuration(), .factor = 0.5, .jitter = 7},
            Constant(0.5));
  EXPECT_EQ(b.options().initial, absl::Nanoseconds(1));
  EXPECT_EQ(b.options().max, absl::Nanoseconds(1));
  EXPECT_EQ(b.options().factor, 1.0);
  EXPECT_EQ(b.options().jitter, 1.0);
  EXPECT_EQ(b.Next(), absl::Nanoseconds(1));
  Backoff nan({.factor = std::nan(""), .jitter = std::nan("")}, Constant(std::nan("")));
  EXPECT_EQ(nan.options().factor, 1.0);
  EXPECT_EQ(nan.options().jitter, 0.0);
  EXPECT_EQ(nan.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, ManyAttemptsDoNotOverflow) {
  Backoff b({.initial = absl::Seconds(1), .max = absl::Hours(1), .factor = 1e6, .jitter = 0});
  for (int i = 0; i < 10000; ++i) b.Next();
  EXPECT_EQ(b.Next(), absl::Hours(1));
}

}  // namespace
}  // namespace dra
