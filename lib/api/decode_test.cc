// Strict decoding: one row per decoding error, plus what decodes.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/config.h"
#include "lib/api/errors.h"
#include "lib/api/test_util.h"

namespace dra::api {
namespace {

using ::dra::api::testing::Params;
using ::dra::api::testing::SharingGates;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kKinds[] =
    "GpuConfig, MigDeviceConfig, VfioDeviceConfig, ComputeDomainChannelConfig, "
    "ComputeDomainDaemonConfig";
constexpr char kMpsFields[] =
    "defaultActiveThreadPercentage, defaultPinnedDeviceMemoryLimit, "
    "defaultPerDevicePinnedMemoryLimit, multiUser";

struct ErrorRow {
  std::string name;
  std::string input;    // JSON text of the parameters
  std::string message;  // the whole expected message
};

std::string Gpu(const std::string& sharing) {
  return Params("GpuConfig", ",\"sharing\":" + sharing);
}
std::string Mps(const std::string& mps) {
  return Gpu("{\"strategy\":\"MPS\",\"mpsConfig\":" + mps + "}");
}

const ErrorRow kErrorRows[] = {
    // ---- the envelope ----
    {"NotAnObject", "[]", "expected a JSON object, got array"},
    {"StringNotAnObject", "\"GpuConfig\"", "expected a JSON object, got string"},
    {"DuplicateTopLevelKey",
     R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","kind":"GpuConfig"})",
     "kind: duplicate field"},
    {"DuplicateNestedKey", Gpu(R"({"strategy":"MPS","strategy":"TimeSlicing"})"),
     "sharing.strategy: duplicate field"},
    {"MissingApiVersion", R"({"kind":"GpuConfig"})",
     "apiVersion: required field is missing, expected resource.nvidia.com/v1beta1"},
    {"NullApiVersion", R"({"apiVersion":null,"kind":"GpuConfig"})",
     "apiVersion: required field is missing, expected resource.nvidia.com/v1beta1"},
    {"ApiVersionNotString", R"({"apiVersion":1,"kind":"GpuConfig"})",
     "apiVersion: expected string, got integer"},
    {"WrongApiVersion", R"({"apiVersion":"resource.nvidia.com/v1","kind":"GpuConfig"})",
     "apiVersion: unsupported value \"resource.nvidia.com/v1\", expected "
     "resource.nvidia.com/v1beta1"},
    {"WrongGroup", R"({"apiVersion":"gpu.resource.nvidia.com/v1alpha1","kind":"GpuConfig"})",
     "apiVersion: unsupported value \"gpu.resource.nvidia.com/v1alpha1\", expected "
     "resource.nvidia.com/v1beta1"},
    {"MissingKind", R"({"apiVersion":"resource.nvidia.com/v1beta1"})",
     std::string("kind: required field is missing, expected one of ") + kKinds},
    {"KindNotString", R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":["GpuConfig"]})",
     "kind: expected string, got array"},
    {"UnknownKind", Params("TpuConfig"),
     std::string("kind: unknown kind \"TpuConfig\", expected one of ") + kKinds},
    {"KindIsCaseSensitive", Params("gpuconfig"),
     std::string("kind: unknown kind \"gpuconfig\", expected one of ") + kKinds},
    {"KindComputeDomain", Params("ComputeDomain"),
     std::string("kind: ComputeDomain is a resource, not an opaque device configuration; "
                 "expected one of ") +
         kKinds},
    {"KindComputeDomainClique", Params("ComputeDomainClique"),
     std::string("kind: ComputeDomainClique is a resource, not an opaque device configuration; "
                 "expected one of ") +
         kKinds},
    // ---- GpuConfig ----
    {"GpuUnknownTopField", Params("GpuConfig", R"(,"metadata":{"name":"x"})"),
     "metadata: unknown field, allowed fields: apiVersion, kind, sharing"},
    {"GpuFieldNamesAreCaseSensitive", Params("GpuConfig", R"(,"Sharing":{"strategy":"MPS"})"),
     "Sharing: unknown field, allowed fields: apiVersion, kind, sharing"},
    {"GpuOddFieldNameIsBracketed", Params("GpuConfig", R"(,"a.b":1)"),
     "[\"a.b\"]: unknown field, allowed fields: apiVersion, kind, sharing"},
    {"SharingNotObject", Gpu(R"("MPS")"), "sharing: expected object, got string"},
    {"SharingUnknownField", Gpu(R"({"strategy":"MPS","fabricConfig":{}})"),
     "sharing.fabricConfig: unknown field, allowed fields: strategy, timeSlicingConfig, mpsConfig"},
    {"StrategyMissing", Gpu("{}"),
     "sharing.strategy: required field is missing, supported GPU sharing strategies: "
     "TimeSlicing, MPS"},
    {"StrategyEmpty", Gpu(R"({"strategy":""})"),
     "sharing.strategy: required field is missing, supported GPU sharing strategies: "
     "TimeSlicing, MPS"},
    {"StrategyNotString", Gpu(R"({"strategy":1})"),
     "sharing.strategy: expected string, got integer"},
    {"StrategyUnknown", Gpu(R"({"strategy":"Fabric"})"),
     "sharing.strategy: unknown GPU sharing strategy: Fabric, supported GPU sharing strategies: "
     "TimeSlicing, MPS"},
    {"StrategyIsCaseSensitive", Gpu(R"({"strategy":"mps"})"),
     "sharing.strategy: unknown GPU sharing strategy: mps, supported GPU sharing strategies: "
     "TimeSlicing, MPS"},
    {"TimeSlicingConfigNotObject", Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":[]})"),
     "sharing.timeSlicingConfig: expected object, got array"},
    {"TimeSlicingConfigUnknownField",
     Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"period":"Long"}})"),
     "sharing.timeSlicingConfig.period: unknown field, allowed fields: interval"},
    {"IntervalNotString", Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":3}})"),
     "sharing.timeSlicingConfig.interval: expected string, got integer"},
    {"IntervalUnknown",
     Gpu(R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"VeryLong"}})"),
     "sharing.timeSlicingConfig.interval: unknown time-slice interval: VeryLong, supported "
     "time-slice intervals: Default, Short, Medium, Long"},
    {"MpsConfigNotObject", Mps("true"), "sharing.mpsConfig: expected object, got boolean"},
    {"MpsConfigUnknownField", Mps(R"({"activeThreadPercentage":50})"),
     std::string("sharing.mpsConfig.activeThreadPercentage: unknown field, allowed fields: ") +
         kMpsFields},
    {"PercentageString", Mps(R"({"defaultActiveThreadPercentage":"50"})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: expected integer, got string"},
    {"PercentageFraction", Mps(R"({"defaultActiveThreadPercentage":50.5})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: expected integer, got number"},
    {"PercentageFloatSyntax", Mps(R"({"defaultActiveThreadPercentage":50.0})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: expected integer, got number"},
    {"PercentageOutOfRange", Mps(R"({"defaultActiveThreadPercentage":18446744073709551615})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: integer out of range, 18446744073709551615 "
     "does not fit a 64-bit signed integer"},
    {"PinnedLimitBoolean", Mps(R"({"defaultPinnedDeviceMemoryLimit":true})"),
     "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: expected quantity string (e.g. \"10Gi\"), "
     "got boolean"},
    {"PerDeviceLimitsNotObject", Mps(R"({"defaultPerDevicePinnedMemoryLimit":["1Gi"]})"),
     "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: expected object mapping device UUID or "
     "index to quantity, got array"},
    {"PerDeviceLimitBoolean", Mps(R"({"defaultPerDevicePinnedMemoryLimit":{"0":false}})"),
     "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[\"0\"]: expected quantity string (e.g. "
     "\"10Gi\"), got boolean"},
    {"PerDeviceLimitNull", Mps(R"({"defaultPerDevicePinnedMemoryLimit":{"GPU-1":null}})"),
     "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[\"GPU-1\"]: expected quantity string "
     "(e.g. \"10Gi\"), got null"},
    {"MultiUserString", Mps(R"({"multiUser":"true"})"),
     "sharing.mpsConfig.multiUser: expected boolean, got string"},
    // ---- MigDeviceConfig ----
    {"MigUnknownTopField", Params("MigDeviceConfig", R"(,"iommu":{})"),
     "iommu: unknown field, allowed fields: apiVersion, kind, sharing"},
    {"MigUnknownSharingField",
     Params("MigDeviceConfig", R"(,"sharing":{"strategy":"TimeSlicing","fabricConfig":{}})"),
     "sharing.fabricConfig: unknown field, allowed fields: strategy, timeSlicingConfig, "
     "mpsConfig"},
    {"MigTimeSlicingConfigNotObject",
     Params("MigDeviceConfig", R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":1})"),
     "sharing.timeSlicingConfig: expected object, got integer"},
    {"MigTimeSlicingConfigUnknownField",
     Params("MigDeviceConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"period":"Long"}})"),
     "sharing.timeSlicingConfig.period: unknown field, allowed fields: interval"},
    {"MigIntervalUnknown",
     Params("MigDeviceConfig",
            R"(,"sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"long"}})"),
     "sharing.timeSlicingConfig.interval: unknown time-slice interval: long, supported "
     "time-slice intervals: Default, Short, Medium, Long"},
    {"MigStrategyMissing", Params("MigDeviceConfig", R"(,"sharing":{})"),
     "sharing.strategy: required field is missing, supported GPU sharing strategies: "
     "TimeSlicing, MPS"},
    {"MigStrategyUnknown", Params("MigDeviceConfig", R"(,"sharing":{"strategy":"Exclusive"})"),
     "sharing.strategy: unknown GPU sharing strategy: Exclusive, supported GPU sharing "
     "strategies: TimeSlicing, MPS"},
    {"MigPercentageString",
     Params("MigDeviceConfig",
            R"(,"sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":"1"}})"),
     "sharing.mpsConfig.defaultActiveThreadPercentage: expected integer, got string"},
    // ---- VfioDeviceConfig ----
    {"VfioUnknownTopField", Params("VfioDeviceConfig", R"(,"sharing":{"strategy":"MPS"})"),
     "sharing: unknown field, allowed fields: apiVersion, kind, iommu"},
    {"IommuNotObject", Params("VfioDeviceConfig", R"(,"iommu":"LegacyOnly")"),
     "iommu: expected object, got string"},
    {"IommuUnknownField", Params("VfioDeviceConfig", R"(,"iommu":{"policy":"LegacyOnly"})"),
     "iommu.policy: unknown field, allowed fields: backendPolicy, enableAPIDevice"},
    {"BackendPolicyNotString", Params("VfioDeviceConfig", R"(,"iommu":{"backendPolicy":1})"),
     "iommu.backendPolicy: expected string, got integer"},
    {"BackendPolicyUnknown",
     Params("VfioDeviceConfig", R"(,"iommu":{"backendPolicy":"IommuFDOnly"})"),
     "iommu.backendPolicy: unknown IOMMU backend policy: IommuFDOnly, supported IOMMU backend "
     "policies: LegacyOnly, PreferIommuFD"},
    {"BackendPolicyIsCaseSensitive",
     Params("VfioDeviceConfig", R"(,"iommu":{"backendPolicy":"PreferIOMMUFD"})"),
     "iommu.backendPolicy: unknown IOMMU backend policy: PreferIOMMUFD, supported IOMMU backend "
     "policies: LegacyOnly, PreferIommuFD"},
    {"EnableApiDeviceString", Params("VfioDeviceConfig", R"(,"iommu":{"enableAPIDevice":"true"})"),
     "iommu.enableAPIDevice: expected boolean, got string"},
    // ---- ComputeDomain configs ----
    {"ChannelUnknownField", Params("ComputeDomainChannelConfig", R"(,"domainID":"u","numNodes":2)"),
     "numNodes: unknown field, allowed fields: apiVersion, kind, domainID, allocationMode"},
    {"ChannelDomainIdNotString", Params("ComputeDomainChannelConfig", R"(,"domainID":7)"),
     "domainID: expected string, got integer"},
    {"ChannelAllocationModeNotString",
     Params("ComputeDomainChannelConfig", R"(,"domainID":"u","allocationMode":true)"),
     "allocationMode: expected string, got boolean"},
    {"DaemonRejectsAllocationMode",
     Params("ComputeDomainDaemonConfig", R"(,"domainID":"u","allocationMode":"All")"),
     "allocationMode: unknown field, allowed fields: apiVersion, kind, domainID"},
    {"DaemonDomainIdNotString", Params("ComputeDomainDaemonConfig", R"(,"domainID":{})"),
     "domainID: expected string, got object"},
};

class ApiDecodeErrorTest : public ::testing::TestWithParam<ErrorRow> {};

TEST_P(ApiDecodeErrorTest, FailsWithPathAndPermanentMark) {
  const ErrorRow& row = GetParam();
  auto gates = SharingGates();
  absl::StatusOr<Config> config = DecodeOpaqueConfigText(row.input, *gates);
  ASSERT_FALSE(config.ok()) << row.input;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), row.message);
  EXPECT_TRUE(IsPermanentConfigError(config.status()));
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiDecodeErrorTest, ::testing::ValuesIn(kErrorRows),
                         [](const auto& info) { return info.param.name; });

// Errors whose text comes from another layer: checked by prefix.
TEST(ApiDecodeTest, InvalidJsonText) {
  auto gates = SharingGates();
  for (const char* text : {"", "{", "{\"apiVersion\":}", "nul", "{\"a\":1,}", "\"\xff\""}) {
    absl::StatusOr<Config> config = DecodeOpaqueConfigText(text, *gates);
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_THAT(std::string(config.status().message()), StartsWith("invalid JSON: ")) << text;
    EXPECT_TRUE(IsPermanentConfigError(config.status()));
  }
}

TEST(ApiDecodeTest, BadQuantityNamesFieldAndValue) {
  auto gates = SharingGates();
  absl::StatusOr<Config> config =
      DecodeOpaqueConfigText(Mps(R"({"defaultPinnedDeviceMemoryLimit":"10GB"})"), *gates);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith("sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: "));
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("10GB"));
  EXPECT_TRUE(IsPermanentConfigError(config.status()));

  config =
      DecodeOpaqueConfigText(Mps(R"({"defaultPerDevicePinnedMemoryLimit":{"1":"x"}})"), *gates);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith("sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[\"1\"]: "));
}

TEST(ApiDecodeTest, DuplicateKeyInsideArrayElementNamesIndex) {
  // No kind has arrays, but the path must still be right for unknown content.
  absl::StatusOr<nlohmann::json> parsed = ParseJsonStrict(R"({"x":[1,{"a":1},{"b":1,"b":2}]})");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "x[2].b: duplicate field");
}

TEST(ApiDecodeTest, DeepNestingIsAnErrorNotACrash) {
  auto gates = SharingGates();
  std::string deep =
      Params("GpuConfig", ",\"sharing\":" + std::string(100000, '[') + std::string(100000, ']'));
  absl::StatusOr<Config> config = DecodeOpaqueConfigText(deep, *gates);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "sharing: expected object, got array");
}

TEST(ApiDecodeTest, NullMembersCountAsAbsent) {
  auto gates = SharingGates();
  absl::StatusOr<Config> config =
      DecodeOpaqueConfigText(Params("GpuConfig", R"(,"sharing":null)"), *gates);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(std::get<GpuConfig>(*config), GpuConfig{});

  config = DecodeOpaqueConfigText(
      Mps(R"({"defaultActiveThreadPercentage":null,"defaultPinnedDeviceMemoryLimit":null,)"
          R"("defaultPerDevicePinnedMemoryLimit":null,"multiUser":null})"),
      *gates);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(std::get<GpuConfig>(*config).sharing->mps_config, MpsConfig{});
}

TEST(ApiDecodeTest, QuantityAcceptsBareNumbersLikeGo) {
  auto gates = SharingGates();
  absl::StatusOr<Config> config =
      DecodeOpaqueConfigText(Mps(R"({"defaultPinnedDeviceMemoryLimit":1073741824,)"
                                 R"("defaultPerDevicePinnedMemoryLimit":{"0":2.5e9}})"),
                             *gates);
  ASSERT_TRUE(config.ok()) << config.status();
  const MpsConfig& mps = *std::get<GpuConfig>(*config).sharing->mps_config;
  EXPECT_EQ(mps.default_pinned_device_memory_limit->Value(), 1073741824);
  EXPECT_EQ(mps.default_per_device_pinned_memory_limit.at("0").Value(), 2500000000);
}

TEST(ApiDecodeTest, EveryFieldOfEveryKind) {
  absl::StatusOr<Config> gpu = DecodeStrict(nlohmann::json::parse(R"({
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {
      "defaultActiveThreadPercentage": 20, "defaultPinnedDeviceMemoryLimit": "4Gi",
      "defaultPerDevicePinnedMemoryLimit": {"0": "2Gi", "GPU-a": "1Gi"}, "multiUser": true}}})"));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const MpsConfig& mps = *std::get<GpuConfig>(*gpu).sharing->mps_config;
  EXPECT_EQ(mps.default_active_thread_percentage, 20);
  EXPECT_EQ(mps.default_pinned_device_memory_limit->ToString(), "4Gi");
  EXPECT_EQ(mps.default_per_device_pinned_memory_limit.size(), 2u);
  EXPECT_EQ(mps.multi_user, true);

  absl::StatusOr<Config> mig = DecodeStrict(nlohmann::json::parse(R"({
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig",
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}})"));
  ASSERT_TRUE(mig.ok()) << mig.status();
  EXPECT_EQ(std::get<MigDeviceConfig>(*mig).sharing->time_slicing_config,
            TimeSlicingConfig{TimeSliceInterval::kLong});

  absl::StatusOr<Config> vfio = DecodeStrict(nlohmann::json::parse(R"({
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "VfioDeviceConfig",
    "iommu": {"backendPolicy": "PreferIommuFD", "enableAPIDevice": true}})"));
  ASSERT_TRUE(vfio.ok()) << vfio.status();
  EXPECT_EQ(std::get<VfioDeviceConfig>(*vfio).iommu,
            (IommuConfig{IommuBackendPolicy::kPreferIommuFd, true}));

  absl::StatusOr<Config> channel = DecodeStrict(nlohmann::json::parse(R"({
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
    "domainID": "5f0c", "allocationMode": "All"})"));
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ(std::get<ComputeDomainChannelConfig>(*channel).domain_id, "5f0c");
  EXPECT_TRUE(std::get<ComputeDomainChannelConfig>(*channel).AllChannels());

  absl::StatusOr<Config> daemon = DecodeStrict(nlohmann::json::parse(R"({
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainDaemonConfig",
    "domainID": "5f0c"})"));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ(KindName(*daemon), "ComputeDomainDaemonConfig");
  EXPECT_FALSE(IsGpuDeviceConfig(*daemon));
}

TEST(ApiDecodeTest, EncodeRoundTripsAndMatchesGoFieldNames) {
  const char* text = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig",)"
                     R"("sharing":{"mpsConfig":{"defaultActiveThreadPercentage":0,)"
                     R"("defaultPerDevicePinnedMemoryLimit":{"1":"512Mi"},)"
                     R"("defaultPinnedDeviceMemoryLimit":"10Gi","multiUser":false},)"
                     R"("strategy":"MPS"}})";
  absl::StatusOr<Config> config = DecodeStrict(nlohmann::json::parse(text));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(EncodeConfig(*config), nlohmann::json::parse(text));

  // Go writes IOMMUConfig.backendPolicy and ComputeDomain*Config.domainID even when empty.
  EXPECT_EQ(EncodeConfig(VfioDeviceConfig{.iommu = IommuConfig{}}),
            nlohmann::json::parse(R"({"apiVersion":"resource.nvidia.com/v1beta1",)"
                                  R"("kind":"VfioDeviceConfig","iommu":{"backendPolicy":""}})"));
  EXPECT_EQ(EncodeConfig(ComputeDomainDaemonConfig{}),
            nlohmann::json::parse(R"({"apiVersion":"resource.nvidia.com/v1beta1",)"
                                  R"("kind":"ComputeDomainDaemonConfig","domainID":""})"));
}

}  // namespace
}  // namespace dra::api
