#include "lib/api/consumable_shares.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"

namespace dra::api {
namespace {

// Go's strconv.Atoi accepts an optional sign and ASCII digits only (no spaces, no "0x").
bool ParseGoInt(absl::string_view s, int64_t* out) {
  absl::string_view digits = s;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) digits.remove_prefix(1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      })) {
    return false;
  }
  return absl::SimpleAtoi(s, out);
}

}  // namespace

std::string ConsumableShares::ToString() const {
  switch (mode) {
    case Mode::kDisabled:
      return "disabled";
    case Mode::kMemory:
      return "memory";
    case Mode::kUnlimited:
      return "unlimited";
    case Mode::kShares:
      return absl::StrCat(shares);
  }
  return "disabled";
}

absl::StatusOr<ConsumableShares> ParseConsumableShares(absl::string_view value,
                                                       const FeatureGates& gates) {
  if (value != "disabled" && !gates.Enabled(gate::kConsumableShares)) {
    return absl::InvalidArgumentError(
        "--consumable-shares requires feature gate ConsumableShares to be enabled");
  }
  if (value == "disabled") return ConsumableShares{};
  if (value == "memory") return ConsumableShares{.mode = ConsumableShares::Mode::kMemory};
  if (value == "unlimited") return ConsumableShares{.mode = ConsumableShares::Mode::kUnlimited};
  int64_t n = 0;
  if (!ParseGoInt(value, &n) || n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid value for --consumable-shares: \"", absl::CHexEscape(value),
                     "\" (must be 'disabled', 'memory', 'unlimited', or a positive integer)"));
  }
  return ConsumableShares{.mode = ConsumableShares::Mode::kShares, .shares = n};
}

absl::Status CheckConsumableSharesAllowSharing(const Config& config,
                                               const ConsumableShares& shares) {
  if (shares.Enabled() && UsesMps(config)) {
    return ConfigError("sharing.strategy",
                       "MPS sharing is not supported when consumable shares is enabled");
  }
  return absl::OkStatus();
}

}  // namespace dra::api
