#include "lib/k8s/quantity.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dra::k8s {
namespace {

constexpr int64_t kNanosPerUnit = 1'000'000'000;
constexpr int64_t kNanosPerMilli = 1'000'000;
// The decimal digits of the largest magnitude we accept, (2^63-1) * 10^9.
constexpr size_t kMaxNanosDigits = 28;

absl::int128 MaxNanos() {
  return absl::int128(std::numeric_limits<int64_t>::max()) * kNanosPerUnit;
}

absl::Status ParseError(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat("invalid quantity \"%s\": %s", text, why));
}

struct Suffix {
  int base;      // 10 or 2
  int exponent;  // power of `base`
  Quantity::Format format;
};

struct SuffixEntry {
  absl::string_view text;
  Suffix suffix;
};

constexpr SuffixEntry kSuffixes[] = {
    {"", {10, 0, Quantity::Format::kDecimalSI}},   {"n", {10, -9, Quantity::Format::kDecimalSI}},
    {"u", {10, -6, Quantity::Format::kDecimalSI}}, {"m", {10, -3, Quantity::Format::kDecimalSI}},
    {"k", {10, 3, Quantity::Format::kDecimalSI}},  {"M", {10, 6, Quantity::Format::kDecimalSI}},
    {"G", {10, 9, Quantity::Format::kDecimalSI}},  {"T", {10, 12, Quantity::Format::kDecimalSI}},
    {"P", {10, 15, Quantity::Format::kDecimalSI}}, {"E", {10, 18, Quantity::Format::kDecimalSI}},
    {"Ki", {2, 10, Quantity::Format::kBinarySI}},  {"Mi", {2, 20, Quantity::Format::kBinarySI}},
    {"Gi", {2, 30, Quantity::Format::kBinarySI}},  {"Ti", {2, 40, Quantity::Format::kBinarySI}},
    {"Pi", {2, 50, Quantity::Format::kBinarySI}},  {"Ei", {2, 60, Quantity::Format::kBinarySI}},
};

constexpr absl::string_view kBinarySuffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};

// Exponents beyond this cannot produce a representable non-zero value; clamping keeps the
// arithmetic below in range for inputs like "1e999999999999".
constexpr int64_t kExponentClamp = 1'000'000;

std::optional<Suffix> ParseSuffix(absl::string_view s) {
  for (const SuffixEntry& entry : kSuffixes) {
    if (entry.text == s) return entry.suffix;
  }
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) return std::nullopt;
  size_t pos = 1;
  bool negative = false;
  if (s[pos] == '+' || s[pos] == '-') {
    negative = s[pos] == '-';
    ++pos;
  }
  if (pos == s.size()) return std::nullopt;
  int64_t exponent = 0;
  for (; pos < s.size(); ++pos) {
    if (s[pos] < '0' || s[pos] > '9') return std::nullopt;
    exponent = std::min(exponent * 10 + (s[pos] - '0'), kExponentClamp);
  }
  return Suffix{10, static_cast<int>(negative ? -exponent : exponent),
                Quantity::Format::kDecimalExponent};
}

// Doubles a decimal digit string in place.
void DoubleDigits(std::string& digits) {
  int carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    int d = (digits[i] - '0') * 2 + carry;
    digits[i] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry != 0) digits.insert(digits.begin(), static_cast<char>('0' + carry));
}

absl::int128 DigitsToInt128(absl::string_view digits) {
  absl::int128 value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

std::string Uint128ToString(absl::uint128 value) {
  if (value == 0) return "0";
  std::string out;
  while (value != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(absl::Uint128Low64(value % 10))));
    value /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// Divides by `divisor`, rounding away from zero.
absl::int128 DivideAwayFromZero(absl::int128 value, int64_t divisor) {
  absl::int128 quotient = value / divisor;
  absl::int128 remainder = value % divisor;
  if (remainder > 0) return quotient + 1;
  if (remainder < 0) return quotient - 1;
  return quotient;
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(absl::string_view text) {
  if (text.empty()) return ParseError(text, "empty string");
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++pos;
  }
  size_t int_start = pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  std::string digits(text.data() + int_start, pos - int_start);
  size_t fraction_digits = 0;
  if (pos < text.size() && text[pos] == '.') {
    size_t frac_start = ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    fraction_digits = pos - frac_start;
    digits.append(text.data() + frac_start, fraction_digits);
  }
  if (digits.empty()) return ParseError(text, "no digits");
  std::optional<Suffix> suffix = ParseSuffix(text.substr(pos));
  if (!suffix.has_value()) {
    return ParseError(text, absl::StrFormat("unknown suffix \"%s\" (want one of Ki Mi Gi Ti Pi Ei, "
                                            "n u m k M G T P E, or e<exponent>)",
                                            text.substr(pos)));
  }

  // value = digits * 10^decimal_exponent, computed exactly on the digit string.
  int64_t decimal_exponent = -static_cast<int64_t>(fraction_digits);
  if (suffix->base == 2) {
    for (int i = 0; i < suffix->exponent; ++i) DoubleDigits(digits);
  } else {
    decimal_exponent += suffix->exponent;
  }
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
  Format format = suffix->format;
  if (digits.empty()) return Quantity(0, format);

  // nanos = digits * 10^shift, rounded up (away from zero) below 1n like upstream.
  int64_t shift = decimal_exponent + 9;
  absl::int128 nanos = 0;
  if (shift >= 0) {
    if (digits.size() + static_cast<uint64_t>(shift) > kMaxNanosDigits) {
      return ParseError(text, "out of range (magnitude above 2^63-1)");
    }
    digits.append(static_cast<size_t>(shift), '0');
    nanos = DigitsToInt128(digits);
  } else {
    uint64_t dropped = static_cast<uint64_t>(-shift);
    if (dropped >= digits.size()) {
      nanos = 1;  // non-zero, below 1n
    } else {
      absl::string_view kept = absl::string_view(digits).substr(0, digits.size() - dropped);
      if (kept.size() > kMaxNanosDigits) {
        return ParseError(text, "out of range (magnitude above 2^63-1)");
      }
      bool inexact = absl::string_view(digits).substr(kept.size()).find_first_not_of('0') !=
                     absl::string_view::npos;
      nanos = DigitsToInt128(kept) + (inexact ? 1 : 0);
    }
  }
  if (nanos > MaxNanos()) return ParseError(text, "out of range (magnitude above 2^63-1)");
  // Upstream prints BinarySI values below one unit as DecimalSI and records that at parse time.
  if (format == Format::kBinarySI && nanos < kNanosPerUnit) format = Format::kDecimalSI;
  return Quantity(negative ? -nanos : nanos, format);
}

Quantity Quantity::FromInt64(int64_t value, Format format) {
  return Quantity(absl::int128(value) * kNanosPerUnit, format);
}

Quantity Quantity::FromMilli(int64_t milli, Format format) {
  return Quantity(absl::int128(milli) * kNanosPerMilli, format);
}

int64_t Quantity::Value() const {
  return static_cast<int64_t>(DivideAwayFromZero(nanos_, kNanosPerUnit));
}

absl::StatusOr<int64_t> Quantity::MilliValue() const {
  absl::int128 milli = DivideAwayFromZero(nanos_, kNanosPerMilli);
  if (milli > std::numeric_limits<int64_t>::max() || milli < std::numeric_limits<int64_t>::min()) {
    return absl::OutOfRangeError(
        absl::StrCat("quantity ", ToString(), " in milli-units does not fit 64 bits"));
  }
  return static_cast<int64_t>(milli);
}

std::string Quantity::ToString() const {
  if (nanos_ == 0) return "0";
  const absl::string_view sign = nanos_ < 0 ? "-" : "";
  const absl::uint128 magnitude = static_cast<absl::uint128>(nanos_ < 0 ? -nanos_ : nanos_);

  Format format = format_;
  if (format == Format::kBinarySI) {
    if (magnitude < absl::uint128(1024) * kNanosPerUnit || magnitude % kNanosPerUnit != 0) {
      format = Format::kDecimalSI;  // upstream: avoids rounding and confusion
    } else {
      uint64_t units = absl::Uint128Low64(magnitude / kNanosPerUnit);
      size_t exponent = 0;
      while (units % 1024 == 0 && exponent + 1 < std::size(kBinarySuffixes)) {
        units /= 1024;
        ++exponent;
      }
      return absl::StrCat(sign, units, kBinarySuffixes[exponent]);
    }
  }

  // mantissa * 10^exponent with no trailing zeros, then exponent lowered to a multiple of 3.
  absl::uint128 mantissa = magnitude;
  int exponent = -9;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  switch (exponent % 3) {
    case 1:
    case -2:
      mantissa *= 10;
      exponent -= 1;
      break;
    case 2:
    case -1:
      mantissa *= 100;
      exponent -= 2;
      break;
    default:
      break;
  }
  std::string number = Uint128ToString(mantissa);
  if (format == Format::kDecimalExponent) {
    if (exponent == 0) return absl::StrCat(sign, number);
    return absl::StrCat(sign, number, "e", exponent);
  }
  for (const SuffixEntry& entry : kSuffixes) {
    if (entry.suffix.base == 10 && entry.suffix.exponent == exponent) {
      return absl::StrCat(sign, number, entry.text);
    }
  }
  // Unreachable: |value| <= 2^63-1 units keeps the exponent within n..E.
  return absl::StrCat(sign, number, "e", exponent);
}

}  // namespace dra::k8s
