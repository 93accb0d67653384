// The driver's gate table: names, stages, defaults, and every dependency and exclusion.

#include "lib/api/driver_gates.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/test_util.h"

namespace dra::api {
namespace {

using ::dra::api::testing::Gates;
using ::dra::api::testing::RegisterDriverGatesAllAvailable;
using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct GateRow {
  const char* name;
  FeatureStage stage;
  bool default_value;
  bool implemented;  // this version acts on the gate (docs/compatibility.md "Feature gates")
};

// docs/compatibility.md "Feature gates", plus the logging gates the Go registry also holds.
const GateRow kExpectedGates[] = {
    {"TimeSlicingSettings", FeatureStage::kAlpha, false, true},
    {"MPSSupport", FeatureStage::kAlpha, false, true},
    {"IMEXDaemonsWithDNSNames", FeatureStage::kBeta, true, false},
    {"PassthroughSupport", FeatureStage::kAlpha, false, true},
    {"DynamicMIG", FeatureStage::kAlpha, false, true},
    {"NVMLDeviceHealthCheck", FeatureStage::kAlpha, false, true},
    {"ComputeDomainCliques", FeatureStage::kBeta, true, false},
    {"CrashOnNVLinkFabricErrors", FeatureStage::kBeta, true, true},
    {"DeviceMetadata", FeatureStage::kAlpha, false, true},
    {"DRAListTypeAttributes", FeatureStage::kAlpha, false, true},
    {"FabricManagerPartitioning", FeatureStage::kAlpha, false, true},
    {"HostManagedIMEXDaemon", FeatureStage::kAlpha, false, true},
    {"ConsumableShares", FeatureStage::kAlpha, false, true},
    {"ContextualLogging", FeatureStage::kBeta, true, false},
    {"LoggingAlphaOptions", FeatureStage::kAlpha, false, false},
    {"LoggingBetaOptions", FeatureStage::kBeta, true, false},
};

// The gates whose capability exists, as the error lists them.
constexpr char kChangeable[] =
    "ConsumableShares, CrashOnNVLinkFabricErrors, DRAListTypeAttributes, DeviceMetadata, "
    "DynamicMIG, FabricManagerPartitioning, HostManagedIMEXDaemon, MPSSupport, "
    "NVMLDeviceHealthCheck, PassthroughSupport, TimeSlicingSettings";

class ApiGateTableTest : public ::testing::TestWithParam<GateRow> {};

TEST_P(ApiGateTableTest, RegisteredWithStageAndDefault) {
  const GateRow& row = GetParam();
  auto gates = Gates();
  EXPECT_TRUE(gates->IsKnown(row.name));
  EXPECT_EQ(gates->Enabled(row.name), row.default_value);
  // The registry prints stage and default in its help; one line per gate.
  std::string prefix = std::string(row.name) + "=true|false (" +
                       std::string(FeatureStageName(row.stage)) +
                       " - default=" + (row.default_value ? "true" : "false") +
                       (row.implemented ? ")" : ", not available)");
  bool found = false;
  for (absl::string_view line : absl::StrSplit(gates->KnownGatesHelp(), '\n')) {
    if (absl::StartsWith(line, std::string(row.name) + "=")) {
      EXPECT_THAT(std::string(line), StartsWith(prefix));
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // The table the registry was built from agrees.
  bool in_table = false;
  for (const DriverGate& gate : DriverGates()) {
    if (gate.name != row.name) continue;
    in_table = true;
    EXPECT_EQ(gate.stage, row.stage);
    EXPECT_EQ(gate.default_value, row.default_value);
  }
  EXPECT_TRUE(in_table);
  EXPECT_EQ(DriverGateImplemented(row.name), row.implemented);
}

// A gate this version does not implement fails at startup when set to anything but its default,
// naming the binary, the reason and the gates that may be changed; its default may be restated.
TEST_P(ApiGateTableTest, UnimplementedGatesKeepTheirDefault) {
  const GateRow& row = GetParam();
  FeatureGates gates;
  ASSERT_TRUE(RegisterDriverFeatureGates(gates, "gpu-kubelet-plugin").ok());
  const std::string flip = absl::StrCat(row.name, "=", row.default_value ? "false" : "true");
  // DeviceMetadata depends on PassthroughSupport (a rule, tested below).
  absl::Status status = gates.Set(
      std::string(row.name) == "DeviceMetadata" ? flip + ",PassthroughSupport=true" : flip);
  if (row.implemented) {
    EXPECT_TRUE(status.ok()) << status;
    return;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              AllOf(StartsWith(flip + ": not available in this version of gpu-kubelet-plugin ("),
                    EndsWith(absl::StrCat("; allowed gates: ", kChangeable))));
  // The webhook reads gates without the rules, but availability still counts.
  FeatureGates webhook;
  ASSERT_TRUE(RegisterDriverFeatureGates(webhook, "webhook").ok());
  EXPECT_THAT(std::string(webhook.SetWithoutConstraintChecks(flip).message()),
              HasSubstr("not available in this version of webhook"));
  EXPECT_TRUE(gates.Set(absl::StrCat(row.name, "=", row.default_value ? "true" : "false")).ok());
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiGateTableTest, ::testing::ValuesIn(kExpectedGates),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ApiDriverGatesTest, NoOtherGates) {
  EXPECT_EQ(DriverGates().size(), std::size(kExpectedGates));
  auto gates = Gates();
  // ToMap also lists AllAlpha and AllBeta.
  EXPECT_EQ(gates->ToMap().size(), std::size(kExpectedGates) + 2);
}

TEST(ApiDriverGatesTest, DefaultsSatisfyTheRules) {
  auto gates = Gates();
  EXPECT_TRUE(gates->Validate().ok());
}

TEST(ApiDriverGatesTest, RegisteringTwiceFails) {
  auto gates = Gates();
  EXPECT_EQ(RegisterDriverFeatureGates(*gates).code(), absl::StatusCode::kAlreadyExists);
}

// A gate this version does not implement (the first in the table) cannot be set; nothing of the
// same Set is applied.
TEST(ApiDriverGatesTest, UnavailableGateFailsWithTheBinaryAndTheReason) {
  const DriverGate* missing = nullptr;
  for (const DriverGate& g : DriverGates()) {
    if (!g.missing.empty() && g.stage == FeatureStage::kAlpha && missing == nullptr) missing = &g;
  }
  if (missing == nullptr) GTEST_SKIP() << "every alpha gate is implemented";
  FeatureGates gates;
  ASSERT_TRUE(RegisterDriverFeatureGates(gates, "gpu-kubelet-plugin").ok());
  EXPECT_EQ(gates.Set(absl::StrCat("MPSSupport=true,", missing->name, "=true")).message(),
            absl::StrCat(missing->name,
                         "=true: not available in this version of "
                         "gpu-kubelet-plugin (",
                         missing->missing, "); allowed gates: ", kChangeable));
  EXPECT_FALSE(gates.Enabled("MPSSupport"));
}

// AllAlpha turns on the alpha gates this version implements and leaves the others at their
// default, so it does not trip the rules among unimplemented gates. The Go driver's exclusions
// among DynamicMIG, MPSSupport, PassthroughSupport and NVMLDeviceHealthCheck are lifted here
// (docs/compatibility.md "Beyond the public driver"), so AllAlpha alone is accepted, where Go
// refuses it.
TEST(ApiDriverGatesTest, AllAlphaSkipsUnimplementedGates) {
  FeatureGates gates;
  ASSERT_TRUE(RegisterDriverFeatureGates(gates, "gpu-kubelet-plugin").ok());
  absl::Status status = gates.Set("AllAlpha=true,AllBeta=false");
  ASSERT_TRUE(status.ok()) << status;
  for (const DriverGate& g : DriverGates()) {
    bool want = g.default_value;
    if (DriverGateImplemented(g.name)) want = g.stage == FeatureStage::kAlpha;
    EXPECT_EQ(gates.Enabled(g.name), want) << g.name;
  }
  for (const char* name :
       {"DynamicMIG", "MPSSupport", "PassthroughSupport", "NVMLDeviceHealthCheck"}) {
    EXPECT_TRUE(gates.Enabled(name)) << name;
  }
}

TEST(ApiDriverGatesTest, UnknownGateIsAnError) {
  FeatureGates gates;
  ASSERT_TRUE(RegisterDriverFeatureGates(gates).ok());
  absl::Status status = gates.Set("TimeSlicing=true");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("unknown feature gate \"TimeSlicing\""));
}

struct RuleRow {
  std::string name;
  std::string spec;     // applied with Set on top of the defaults
  std::string message;  // "" = accepted
};

const RuleRow kRuleRows[] = {
    {"CliquesRequireDnsNames", "IMEXDaemonsWithDNSNames=false",
     "feature gate ComputeDomainCliques requires IMEXDaemonsWithDNSNames to also be enabled"},
    {"CliquesOffWithoutDnsNames", "IMEXDaemonsWithDNSNames=false,ComputeDomainCliques=false", ""},
    {"DeviceMetadataRequiresPassthrough", "DeviceMetadata=true",
     "feature gate DeviceMetadata requires PassthroughSupport to also be enabled"},
    {"DeviceMetadataWithPassthrough", "DeviceMetadata=true,PassthroughSupport=true", ""},
    // The Go driver's exclusions, lifted (docs/compatibility.md "Beyond the public driver").
    {"DynamicMigWithPassthrough", "DynamicMIG=true,PassthroughSupport=true", ""},
    {"DynamicMigWithHealthCheck", "DynamicMIG=true,NVMLDeviceHealthCheck=true", ""},
    {"DynamicMigWithMps", "DynamicMIG=true,MPSSupport=true", ""},
    {"PassthroughWithHealthCheck", "PassthroughSupport=true,NVMLDeviceHealthCheck=true", ""},
    {"AllFourTogether",
     "DynamicMIG=true,MPSSupport=true,PassthroughSupport=true,NVMLDeviceHealthCheck=true", ""},
    // Documented as exclusive, not enforced by the Go code (docs/compatibility.md "Feature gates").
    {"MpsWithHealthCheckAllowed", "MPSSupport=true,NVMLDeviceHealthCheck=true", ""},
    {"DynamicMigWithTimeSlicing", "DynamicMIG=true,TimeSlicingSettings=true", ""},
    {"AllSharingGates", "TimeSlicingSettings=true,MPSSupport=true,ConsumableShares=true", ""},
    {"PassthroughStack",
     "PassthroughSupport=true,DeviceMetadata=true,FabricManagerPartitioning=true", ""},
    {"TrailingCommaAccepted", "MPSSupport=true,", ""},
};

class ApiGateRuleTest : public ::testing::TestWithParam<RuleRow> {};

// The rules hold among gates this version does not implement yet, which cannot be set; they are
// checked on a registry where every gate is available, as it will be once implemented.
TEST_P(ApiGateRuleTest, Enforced) {
  const RuleRow& row = GetParam();
  FeatureGates gates;
  RegisterDriverGatesAllAvailable(gates);
  absl::Status status = gates.Set(row.spec);
  if (row.message.empty()) {
    EXPECT_TRUE(status.ok()) << status;
    return;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), row.message);
  // The webhook reads gates without the rules, as the Go webhook does.
  FeatureGates webhook;
  RegisterDriverGatesAllAvailable(webhook);
  EXPECT_TRUE(webhook.SetWithoutConstraintChecks(row.spec).ok());
}

INSTANTIATE_TEST_SUITE_P(Rows, ApiGateRuleTest, ::testing::ValuesIn(kRuleRows),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dra::api
