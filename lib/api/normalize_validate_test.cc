// Normalize (one row per default) and Validate (one row per rule and message).

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/config.h"
#include "lib/api/errors.h"
#include "lib/api/test_util.h"
#include "lib/common/status.h"

namespace dra::api {
namespace {

using ::dra::api::testing::Gates;
using ::dra::api::testing::Params;

// ---- Normalize: input parameters -> the JSON of the normalized config ----

struct DefaultRow {
  std::string name;
  std::string input;
  std::string normalized;
};

const DefaultRow kDefaultRows[] = {
    {"GpuNoSharingStaysExclusive", Params("GpuConfig"), Params("GpuConfig")},
    {"TimeSlicingGetsDefaultInterval",
     Params("GpuConfig", R"(,"sharing":{"strategy":"TimeSlicing"})"),
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Default"}})")},
    // The Go driver panics on this one (nil interval dereferenced in Validate).
    {"EmptyTimeSlicingConfigGetsDefaultInterval",
     Params("GpuConfig", R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{}})"),
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Default"}})")},
    {"NullIntervalGetsDefaultInterval",
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":null}})"),
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Default"}})")},
    {"ExplicitIntervalKept",
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}})"),
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}})")},
    {"MpsGetsEmptyMpsConfig", Params("GpuConfig", R"(,"sharing":{"strategy":"MPS"})"),
     Params("GpuConfig", R"(,"sharing":{"strategy":"MPS","mpsConfig":{}})")},
    {"MpsConfigKept",
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":10}})"),
     Params("GpuConfig",
            R"(,"sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":10}})")},
    {"MigNoSharingStaysExclusive", Params("MigDeviceConfig"), Params("MigDeviceConfig")},
    {"MigMpsGetsEmptyMpsConfig", Params("MigDeviceConfig", R"(,"sharing":{"strategy":"MPS"})"),
     Params("MigDeviceConfig", R"(,"sharing":{"strategy":"MPS","mpsConfig":{}})")},
    {"MigTimeSlicingGetsNothing",
     Params("MigDeviceConfig", R"(,"sharing":{"strategy":"TimeSlicing"})"),
     Params("MigDeviceConfig", R"(,"sharing":{"strategy":"TimeSlicing"})")},
    {"MigEmptyTimeSlicingConfigGetsDefaultInterval",
     Params("MigDeviceConfig", R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{}})"),
     Params("MigDeviceConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Default"}})")},
    {"MigIntervalKept",
     Params("MigDeviceConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})"),
     Params("MigDeviceConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})")},
    {"VfioGetsLegacyOnlyWithoutApiDevice", Params("VfioDeviceConfig"),
     Params("VfioDeviceConfig",
            R"(,"iommu":{"backendPolicy":"LegacyOnly","enableAPIDevice":false})")},
    {"VfioEmptyIommuGetsDefaults", Params("VfioDeviceConfig", R"(,"iommu":{})"),
     Params("VfioDeviceConfig",
            R"(,"iommu":{"backendPolicy":"LegacyOnly","enableAPIDevice":false})")},
    {"VfioEmptyPolicyGetsLegacyOnly",
     Params("VfioDeviceConfig", R"(,"iommu":{"backendPolicy":"","enableAPIDevice":true})"),
     Params("VfioDeviceConfig",
            R"(,"iommu":{"backendPolicy":"LegacyOnly","enableAPIDevice":true})")},
    {"VfioPolicyKept", Params("VfioDeviceConfig", R"(,"iommu":{"backendPolicy":"PreferIommuFD"})"),
     Params("VfioDeviceConfig",
            R"(,"iommu":{"backendPolicy":"PreferIommuFD","enableAPIDevice":false})")},
    {"ChannelUnchanged", Params("ComputeDomainChannelConfig", R"(,"domainID":"d")"),
     Params("ComputeDomainChannelConfig", R"(,"domainID":"d")")},
    {"DaemonUnchanged", Params("ComputeDomainDaemonConfig", R"(,"domainID":"d")"),
     Params("ComputeDomainDaemonConfig", R"(,"domainID":"d")")},
};

class ApiNormalizeTest : public ::testing::TestWithParam<DefaultRow> {};

TEST_P(ApiNormalizeTest, FillsDefaultsIdempotently) {
  const DefaultRow& row = GetParam();
  absl::StatusOr<Config> config = DecodeStrict(nlohmann::json::parse(row.input));
  ASSERT_TRUE(config.ok()) << config.status();
  Normalize(*config);
  EXPECT_EQ(EncodeConfig(*config), nlohmann::json::parse(row.normalized));
  Config again = *config;
  Normalize(again);
  EXPECT_EQ(again, *config);
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiNormalizeTest, ::testing::ValuesIn(kDefaultRows),
                         [](const auto& info) { return info.param.name; });

TEST(ApiDefaultConfigTest, MatchTheGoDriver) {
  EXPECT_EQ(DefaultGpuConfig(), GpuConfig{});
  EXPECT_EQ(DefaultMigDeviceConfig(), MigDeviceConfig{});
  EXPECT_EQ(DefaultVfioDeviceConfig(false), std::nullopt);
  EXPECT_EQ(DefaultVfioDeviceConfig(true),
            (VfioDeviceConfig{IommuConfig{IommuBackendPolicy::kLegacyOnly, false}}));
}

// ---- Validate: parameters + gates -> OK or the exact message ----

struct ValidateRow {
  std::string name;
  std::string gates;    // FeatureGates::Set spec
  std::string input;    // parameters JSON text
  std::string message;  // "" = valid
};

std::string Gpu(const std::string& sharing) {
  return Params("GpuConfig", ",\"sharing\":" + sharing);
}
std::string Mig(const std::string& sharing) {
  return Params("MigDeviceConfig", ",\"sharing\":" + sharing);
}
std::string GpuMps(const std::string& mps) {
  return Gpu("{\"strategy\":\"MPS\",\"mpsConfig\":" + mps + "}");
}
std::string MigMps(const std::string& mps) {
  return Mig("{\"strategy\":\"MPS\",\"mpsConfig\":" + mps + "}");
}

constexpr char kSharing[] = "TimeSlicingSettings=true,MPSSupport=true";
constexpr char kTimeSlicingGateOff[] =
    "\"TimeSlicing\" is selected as the GPU sharing strategy, but the \"TimeSlicingSettings\" "
    "feature gate is not enabled";
constexpr char kMpsGateOff[] =
    "\"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" feature gate is not "
    "enabled";

const ValidateRow kValidateRows[] = {
    // Gates.
    {"GpuExclusiveNeedsNoGate", "", Params("GpuConfig"), ""},
    {"GpuTimeSlicingNeedsGate", "MPSSupport=true", Gpu(R"({"strategy":"TimeSlicing"})"),
     std::string("sharing.strategy: ") + kTimeSlicingGateOff},
    {"GpuTimeSlicingWithGate", "TimeSlicingSettings=true", Gpu(R"({"strategy":"TimeSlicing"})"),
     ""},
    {"GpuMpsNeedsGate", "TimeSlicingSettings=true", Gpu(R"({"strategy":"MPS"})"),
     std::string("sharing.strategy: ") + kMpsGateOff},
    {"GpuMpsWithGate", "MPSSupport=true", Gpu(R"({"strategy":"MPS"})"), ""},
    {"MigTimeSlicingNeedsGate", "", Mig(R"({"strategy":"TimeSlicing"})"),
     std::string("sharing.strategy: ") + kTimeSlicingGateOff},
    {"MigTimeSlicingWithGate", "TimeSlicingSettings=true", Mig(R"({"strategy":"TimeSlicing"})"),
     ""},
    {"MigMpsNeedsGate", "", Mig(R"({"strategy":"MPS"})"),
     std::string("sharing.strategy: ") + kMpsGateOff},
    {"MigMpsWithGate", "MPSSupport=true", Mig(R"({"strategy":"MPS"})"), ""},
    {"GateCheckedBeforeSettings", "",
     Gpu(R"({"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":-1}})"),
     std::string("sharing.strategy: ") + kMpsGateOff},
    // Settings of the other strategy (Go: prepare-time errors).
    {"TimeSlicingWithMpsConfig", kSharing, Gpu(R"({"strategy":"TimeSlicing","mpsConfig":{}})"),
     "sharing.mpsConfig: cannot use MpsConfig with the 'TimeSlicing' strategy"},
    {"MpsWithTimeSlicingConfig", kSharing,
     Gpu(R"({"strategy":"MPS","timeSlicingConfig":{"interval":"Long"}})"),
     "sharing.timeSlicingConfig: cannot use TimeSlicingConfig with the 'MPS' strategy"},
    {"MpsWithEmptyTimeSlicingConfig", kSharing, Gpu(R"({"strategy":"MPS","timeSlicingConfig":{}})"),
     "sharing.timeSlicingConfig: cannot use TimeSlicingConfig with the 'MPS' strategy"},
    {"MigTimeSlicingIgnoresMpsConfigLikeGo", kSharing,
     Mig(R"({"strategy":"TimeSlicing","mpsConfig":{"defaultActiveThreadPercentage":500}})"), ""},
    {"MigIntervalNeedsGate", "MPSSupport=true",
     Mig(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})"),
     std::string("sharing.strategy: ") + kTimeSlicingGateOff},
    {"MigIntervalWithGate", "TimeSlicingSettings=true",
     Mig(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})"), ""},
    {"MigMpsWithTimeSlicingConfig", kSharing,
     Mig(R"({"strategy":"MPS","timeSlicingConfig":{"interval":"Short"}})"),
     "sharing.timeSlicingConfig: cannot use TimeSlicingConfig with the 'MPS' strategy"},
    {"MigMpsWithEmptyTimeSlicingConfig", kSharing,
     Mig(R"({"strategy":"MPS","timeSlicingConfig":{}})"),
     "sharing.timeSlicingConfig: cannot use TimeSlicingConfig with the 'MPS' strategy"},
    // Every interval.
    {"IntervalDefault", kSharing,
     Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Default"}})"), ""},
    {"IntervalShort", kSharing,
     Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}})"), ""},
    {"IntervalMedium", kSharing,
     Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Medium"}})"), ""},
    {"IntervalLong", kSharing,
     Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})"), ""},
    // Active thread percentage.
    {"PercentageNegative", kSharing, GpuMps(R"({"defaultActiveThreadPercentage":-1})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: active thread percentage must not be "
     "negative"},
    {"PercentageAbove100", kSharing, GpuMps(R"({"defaultActiveThreadPercentage":101})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: active thread percentage must not be "
     "greater than 100"},
    {"PercentageZero", kSharing, GpuMps(R"({"defaultActiveThreadPercentage":0})"), ""},
    {"Percentage100", kSharing, GpuMps(R"({"defaultActiveThreadPercentage":100})"), ""},
    {"MigPercentageNegative", kSharing, MigMps(R"({"defaultActiveThreadPercentage":-5})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: active thread percentage must not be "
     "negative"},
    {"MigPercentageAbove100", kSharing, MigMps(R"({"defaultActiveThreadPercentage":1000})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: active thread percentage must not be "
     "greater than 100"},
    // Pinned memory limits that can never work (Go: prepare-time errors).
    {"DefaultLimitBelowOneMiB", kSharing, GpuMps(R"({"defaultPinnedDeviceMemoryLimit":"1Ki"})"),
     "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid limit: default value set too "
     "low: 1Ki"},
    {"DefaultLimitOneByteShort", kSharing,
     GpuMps(R"({"defaultPinnedDeviceMemoryLimit":"1048575"})"),
     "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid limit: default value set too "
     "low: 1048575"},
    {"DefaultLimitZero", kSharing, GpuMps(R"({"defaultPinnedDeviceMemoryLimit":"0"})"),
     "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid limit: default value set too "
     "low: 0"},
    {"DefaultLimitOneMiB", kSharing, GpuMps(R"({"defaultPinnedDeviceMemoryLimit":"1Mi"})"), ""},
    {"PerDeviceLimitBelowOneMiB", kSharing,
     GpuMps(R"({"defaultPerDevicePinnedMemoryLimit":{"0":"512Ki"}})"),
     "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[\"0\"]: invalid limit: value set too "
     "low: 0: 512Ki"},
    {"PerDeviceLimitNegative", kSharing,
     GpuMps(R"({"defaultPerDevicePinnedMemoryLimit":{"GPU-x":"-1Gi"}})"),
     "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[\"GPU-x\"]: invalid limit: value set "
     "too low: GPU-x: -1Gi"},
    {"MigPerDeviceLimitBelowOneMiB", kSharing,
     MigMps(R"({"defaultPerDevicePinnedMemoryLimit":{"MIG-x":"1k"}})"),
     "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[\"MIG-x\"]: invalid limit: value set "
     "too low: MIG-x: 1k"},
    // VFIO: no gates inside the type (Go parity; the Go webhook's rejection is a bug).
    {"VfioWithoutPassthroughGate", "", Params("VfioDeviceConfig"), ""},
    {"VfioApiDeviceWithoutDeviceMetadataGate", "",
     Params("VfioDeviceConfig",
            R"(,"iommu":{"backendPolicy":"LegacyOnly","enableAPIDevice":true})"),
     ""},
    // ComputeDomain configs.
    {"ChannelEmptyDomainId", "", Params("ComputeDomainChannelConfig"),
     "domainID: domainID cannot be empty"},
    {"ChannelExplicitlyEmptyDomainId", "",
     Params("ComputeDomainChannelConfig", R"(,"domainID":"")"),
     "domainID: domainID cannot be empty"},
    {"ChannelAnyAllocationModeLikeGo", "",
     Params("ComputeDomainChannelConfig", R"(,"domainID":"d","allocationMode":"Some")"), ""},
    {"DaemonEmptyDomainId", "", Params("ComputeDomainDaemonConfig"),
     "domainID: domainID cannot be empty"},
    {"DaemonWithDomainId", "", Params("ComputeDomainDaemonConfig", R"(,"domainID":"d")"), ""},
};

class ApiValidateTest : public ::testing::TestWithParam<ValidateRow> {};

TEST_P(ApiValidateTest, AppliesRule) {
  const ValidateRow& row = GetParam();
  auto gates = Gates(row.gates);
  absl::StatusOr<Config> config = DecodeOpaqueConfigText(row.input, *gates);
  if (row.message.empty()) {
    EXPECT_TRUE(config.ok()) << config.status();
    return;
  }
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), row.message);
  EXPECT_TRUE(IsPermanentConfigError(config.status()));
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiValidateTest, ::testing::ValuesIn(kValidateRows),
                         [](const auto& info) { return info.param.name; });

TEST(ApiValidateUnnormalizedTest, DoesNotCrash) {
  auto gates = Gates(kSharing);
  // What Go would dereference: TimeSlicing with no timeSlicingConfig / no interval.
  EXPECT_TRUE(Validate(GpuConfig{GpuSharing{SharingStrategy::kTimeSlicing}}, *gates).ok());
  EXPECT_TRUE(
      Validate(GpuConfig{GpuSharing{SharingStrategy::kTimeSlicing, TimeSlicingConfig{}}}, *gates)
          .ok());
  EXPECT_TRUE(Validate(GpuConfig{GpuSharing{SharingStrategy::kMps}}, *gates).ok());
  EXPECT_TRUE(Validate(VfioDeviceConfig{}, *gates).ok());
}

TEST(ApiErrorsTest, PermanentMarkSurvivesAnnotationAndIsAbsentElsewhere) {
  absl::Status error = ConfigError("sharing.strategy", "bad");
  EXPECT_EQ(error.message(), "sharing.strategy: bad");
  EXPECT_TRUE(IsPermanentConfigError(error));
  EXPECT_TRUE(IsPermanentConfigError(dra::Annotate(error, "claim default/c")));
  EXPECT_FALSE(IsPermanentConfigError(absl::InvalidArgumentError("bad")));
  EXPECT_FALSE(IsPermanentConfigError(absl::OkStatus()));
  EXPECT_TRUE(MarkPermanentConfigError(absl::OkStatus()).ok());
  EXPECT_TRUE(IsPermanentConfigError(MarkPermanentConfigError(absl::UnavailableError("x"))));
  EXPECT_EQ(ConfigError("", "whole").message(), "whole");
}

TEST(ApiTypesTest, NamesAndValues) {
  EXPECT_EQ(TimeSliceIntervalValue(TimeSliceInterval::kDefault), 0);
  EXPECT_EQ(TimeSliceIntervalValue(TimeSliceInterval::kShort), 1);
  EXPECT_EQ(TimeSliceIntervalValue(TimeSliceInterval::kMedium), 2);
  EXPECT_EQ(TimeSliceIntervalValue(TimeSliceInterval::kLong), 3);
  EXPECT_EQ(ParseTimeSliceInterval("Long"), TimeSliceInterval::kLong);
  EXPECT_EQ(ParseTimeSliceInterval("long"), std::nullopt);
  EXPECT_EQ(SharingStrategyName(SharingStrategy::kMps), "MPS");
  EXPECT_EQ(ParseSharingStrategy("TimeSlicing"), SharingStrategy::kTimeSlicing);
  EXPECT_EQ(IommuBackendPolicyName(IommuBackendPolicy::kPreferIommuFd), "PreferIommuFD");
  EXPECT_EQ(ParseIommuBackendPolicy("LegacyOnly"), IommuBackendPolicy::kLegacyOnly);
  EXPECT_TRUE(UsesMps(MigDeviceConfig{MigDeviceSharing{SharingStrategy::kMps}}));
  EXPECT_FALSE(UsesMps(GpuConfig{GpuSharing{SharingStrategy::kTimeSlicing}}));
  EXPECT_FALSE(UsesMps(VfioDeviceConfig{}));
  EXPECT_TRUE(IsGpuDeviceConfig(VfioDeviceConfig{}));
  EXPECT_FALSE(IsGpuDeviceConfig(ComputeDomainChannelConfig{}));
  EXPECT_FALSE(ComputeDomainChannelConfig{.allocation_mode = "Single"}.AllChannels());
}

}  // namespace
}  // namespace dra::api
