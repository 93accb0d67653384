// --consumable-shares parsing and the MPS rule.

#include "lib/api/consumable_shares.h"

#include <string>

#include "gtest/gtest.h"
#include "lib/api/config.h"
#include "lib/api/errors.h"
#include "lib/api/test_util.h"

namespace dra::api {
namespace {

using ::dra::api::testing::Gates;
using Mode = ConsumableShares::Mode;

constexpr char kNeedsGate[] =
    "--consumable-shares requires feature gate ConsumableShares to be enabled";

std::string Invalid(const std::string& value) {
  return "invalid value for --consumable-shares: \"" + value +
         "\" (must be 'disabled', 'memory', 'unlimited', or a positive integer)";
}

struct FlagRow {
  std::string name;
  std::string value;
  bool gate;
  Mode mode;            // when message is empty
  int64_t shares;       // when message is empty
  std::string message;  // "" = accepted
};

const FlagRow kFlagRows[] = {
    {"DisabledWithoutGate", "disabled", false, Mode::kDisabled, 0, ""},
    {"DisabledWithGate", "disabled", true, Mode::kDisabled, 0, ""},
    {"MemoryNeedsGate", "memory", false, Mode::kDisabled, 0, kNeedsGate},
    {"UnlimitedNeedsGate", "unlimited", false, Mode::kDisabled, 0, kNeedsGate},
    {"SharesNeedGate", "4", false, Mode::kDisabled, 0, kNeedsGate},
    // The gate is checked first, even for a value that would not parse (Go's order).
    {"GarbageWithoutGateReportsGate", "lots", false, Mode::kDisabled, 0, kNeedsGate},
    {"Memory", "memory", true, Mode::kMemory, 0, ""},
    {"Unlimited", "unlimited", true, Mode::kUnlimited, 0, ""},
    {"Shares", "4", true, Mode::kShares, 4, ""},
    {"SharesWithPlusSign", "+8", true, Mode::kShares, 8, ""},
    {"SharesLeadingZero", "016", true, Mode::kShares, 16, ""},
    {"Zero", "0", true, Mode::kDisabled, 0, Invalid("0")},
    {"Negative", "-2", true, Mode::kDisabled, 0, Invalid("-2")},
    {"Word", "lots", true, Mode::kDisabled, 0, Invalid("lots")},
    {"CaseMatters", "Memory", true, Mode::kDisabled, 0, Invalid("Memory")},
    {"Empty", "", true, Mode::kDisabled, 0, Invalid("")},
    {"Spaces", " 4", true, Mode::kDisabled, 0, Invalid(" 4")},
    {"Fraction", "1.5", true, Mode::kDisabled, 0, Invalid("1.5")},
    {"Overflow", "99999999999999999999", true, Mode::kDisabled, 0, Invalid("99999999999999999999")},
};

class ApiConsumableSharesFlagTest : public ::testing::TestWithParam<FlagRow> {};

TEST_P(ApiConsumableSharesFlagTest, Parses) {
  const FlagRow& row = GetParam();
  auto gates = Gates(row.gate ? "ConsumableShares=true" : "");
  absl::StatusOr<ConsumableShares> parsed = ParseConsumableShares(row.value, *gates);
  if (!row.message.empty()) {
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), row.message);
    return;
  }
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->mode, row.mode);
  EXPECT_EQ(parsed->shares, row.shares);
  EXPECT_EQ(parsed->Enabled(), row.mode != Mode::kDisabled);
  // ToString parses back to the same value.
  absl::StatusOr<ConsumableShares> again = ParseConsumableShares(parsed->ToString(), *gates);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *parsed);
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiConsumableSharesFlagTest, ::testing::ValuesIn(kFlagRows),
                         [](const auto& info) { return info.param.name; });

TEST(ApiConsumableSharesTest, MpsRejectedWhenEnabled) {
  const ConsumableShares off;
  const ConsumableShares memory{.mode = Mode::kMemory};
  const ConsumableShares shares{.mode = Mode::kShares, .shares = 3};
  const Config gpu_mps = GpuConfig{GpuSharing{SharingStrategy::kMps}};
  const Config mig_mps = MigDeviceConfig{MigDeviceSharing{SharingStrategy::kMps}};
  for (const Config& config : {gpu_mps, mig_mps}) {
    EXPECT_TRUE(CheckConsumableSharesAllowSharing(config, off).ok());
    for (const ConsumableShares& mode : {memory, shares}) {
      absl::Status status = CheckConsumableSharesAllowSharing(config, mode);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(status.message(),
                "sharing.strategy: MPS sharing is not supported when consumable shares is "
                "enabled");
      EXPECT_TRUE(IsPermanentConfigError(status));
    }
  }
}

TEST(ApiConsumableSharesTest, OtherConfigsAllowed) {
  const ConsumableShares memory{.mode = Mode::kMemory};
  for (const Config& config :
       {Config{GpuConfig{}}, Config{GpuConfig{GpuSharing{SharingStrategy::kTimeSlicing}}},
        Config{MigDeviceConfig{MigDeviceSharing{SharingStrategy::kTimeSlicing}}},
        Config{VfioDeviceConfig{}}, Config{ComputeDomainChannelConfig{"d", ""}}}) {
    EXPECT_TRUE(CheckConsumableSharesAllowSharing(config, memory).ok()) << KindName(config);
  }
}

}  // namespace
}  // namespace dra::api
