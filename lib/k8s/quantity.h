#pragma once

// Kubernetes resource.Quantity (k8s.io/apimachinery/pkg/api/resource): parsing, canonical
// formatting and comparison, exact (no floating point).
//
// Grammar (as upstream):  <sign>? <digits>[.<digits>] <suffix>
//   suffix: binary  Ki Mi Gi Ti Pi Ei                     (2^10 .. 2^60)
//           decimal n u m "" k M G T P E                  (10^-9 .. 10^18)
//           exponent e<int> | E<int>  ("1e3"; note "1E" alone is exa)
//
// Representation: the value in nano-units (10^-9) in a 128-bit integer, plus the format family
// of the input, which canonical output keeps. Like upstream, a value with more precision than
// 1n is rounded up, away from zero ("0.1n" -> "1n").
//
// Differences from upstream, on purpose:
// - The magnitude is limited to 2^63-1 units; larger values are a Parse error ("out of range").
//   Upstream silently caps BinarySI values there and keeps larger decimal ones.
// - At least one digit is required; upstream reads "", "Ki", "-" or "." as zero.
// - A leading "+" is never echoed back (upstream may keep "+1" verbatim).
//
// Canonical form (ToString, identical to upstream's CanonicalizeBytes):
// - zero is "0";
// - BinarySI: when |v| < 1024 or v is not a whole number, the value is printed as DecimalSI;
//   otherwise the largest binary suffix that divides exactly ("81920Mi" -> "80Gi",
//   "1.5Gi" -> "1536Mi", "1024" bytes built in code -> "1Ki");
// - DecimalSI / DecimalExponent: mantissa * 10^e with no fractional digits, e a multiple of 3 and
//   as large as possible ("1.5" -> "1500m", "1000" -> "1k", "1024" stays "1024"), with the SI
//   suffix for e, or "e<e>" for DecimalExponent ("1e3" -> "1e3", "1500e-3" -> "1500e-3").
//
// Thread-safety: a value type; const methods may be called concurrently.

#include <compare>
#include <cstdint>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::k8s {

class Quantity {
 public:
  enum class Format { kDecimalSI, kBinarySI, kDecimalExponent };

  // Zero, DecimalSI.
  Quantity() = default;

  // Parses a quantity string; errors are InvalidArgument and quote `text`.
  static absl::StatusOr<Quantity> Parse(absl::string_view text);

  // `value` whole units, printed in `format`'s family.
  static Quantity FromInt64(int64_t value, Format format = Format::kDecimalSI);
  // A byte count, printed with binary suffixes (1073741824 -> "1Gi").
  static Quantity FromBytes(int64_t bytes) { return FromInt64(bytes, Format::kBinarySI); }
  // `milli` thousandths of a unit (CPU-like values: 1500 -> "1500m").
  static Quantity FromMilli(int64_t milli, Format format = Format::kDecimalSI);

  // Whole units, rounded up away from zero (upstream Value()). Never overflows: Parse bounds the
  // magnitude to 2^63-1 units.
  int64_t Value() const;
  // Thousandths of a unit, rounded up away from zero (upstream MilliValue()); OutOfRange when the
  // result does not fit int64 (magnitudes above about 9.2e15 units).
  absl::StatusOr<int64_t> MilliValue() const;

  bool IsZero() const { return nanos_ == 0; }
  // -1, 0 or 1.
  int Sign() const { return nanos_ < 0 ? -1 : (nanos_ > 0 ? 1 : 0); }
  Format GetFormat() const { return format_; }

  // Canonical Kubernetes string, as the API server would serialize this value.
  std::string ToString() const;

  // Comparisons are by value only: "1Ki" == "1024". Hence weak ordering: equal values may still
  // print differently.
  friend bool operator==(const Quantity& a, const Quantity& b) { return a.nanos_ == b.nanos_; }
  friend std::weak_ordering operator<=>(const Quantity& a, const Quantity& b) {
    if (a.nanos_ < b.nanos_) return std::weak_ordering::less;
    if (b.nanos_ < a.nanos_) return std::weak_ordering::greater;
    return std::weak_ordering::equivalent;
  }

 private:
  Quantity(absl::int128 nanos, Format format) : nanos_(nanos), format_(format) {}

  absl::int128 nanos_ = 0;  // the value in units of 10^-9
  Format format_ = Format::kDecimalSI;
};

}  // namespace dra::k8s
