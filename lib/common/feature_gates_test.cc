#include "lib/common/feature_gates.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The gates and constraints of the Go driver (docs/compatibility.md "Feature gates"), plus a locked
// GA and a deprecated gate.
void RegisterDriverGates(FeatureGates& g) {
  using S = FeatureStage;
  ASSERT_TRUE(g.Register("TimeSlicingSettings", {.stage = S::kAlpha}).ok());
  ASSERT_TRUE(g.Register("MPSSupport", {.stage = S::kAlpha}).ok());
  ASSERT_TRUE(
      g.Register("IMEXDaemonsWithDNSNames", {.stage = S::kBeta, .default_value = true}).ok());
  ASSERT_TRUE(g.Register("PassthroughSupport", {.stage = S::kAlpha}).ok());
  ASSERT_TRUE(g.Register("DynamicMIG", {.stage = S::kAlpha}).ok());
  ASSERT_TRUE(g.Register("NVMLDeviceHealthCheck", {.stage = S::kAlpha}).ok());
  ASSERT_TRUE(g.Register("ComputeDomainCliques", {.stage = S::kBeta, .default_value = true}).ok());
  ASSERT_TRUE(g.Register("DeviceMetadata", {.stage = S::kAlpha}).ok());
  ASSERT_TRUE(g.Register("OldThing", {.stage = S::kDeprecated, .default_value = false}).ok());
  ASSERT_TRUE(g.Register("DoneThing", {.stage = S::kGA,
                                       .default_value = true,
                                       .lock_to_default = true,
                                       .description = "graduated"})
                  .ok());
  ASSERT_TRUE(g.AddDependency("ComputeDomainCliques", "IMEXDaemonsWithDNSNames").ok());
  ASSERT_TRUE(g.AddMutualExclusion("DynamicMIG", "PassthroughSupport").ok());
  ASSERT_TRUE(g.AddMutualExclusion("DynamicMIG", "NVMLDeviceHealthCheck").ok());
  ASSERT_TRUE(g.AddMutualExclusion("DynamicMIG", "MPSSupport").ok());
  ASSERT_TRUE(g.AddMutualExclusion("PassthroughSupport", "NVMLDeviceHealthCheck").ok());
  ASSERT_TRUE(g.AddDependency("DeviceMetadata", "PassthroughSupport").ok());
}

class FeatureGatesTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterDriverGates(gates_); }
  FeatureGates gates_;
};

TEST_F(FeatureGatesTest, DefaultsApplyUntilSet) {
  EXPECT_FALSE(gates_.Enabled("DynamicMIG"));
  EXPECT_TRUE(gates_.Enabled("IMEXDaemonsWithDNSNames"));
  EXPECT_TRUE(gates_.Enabled("ComputeDomainCliques"));
  EXPECT_TRUE(gates_.Enabled("DoneThing"));
  EXPECT_TRUE(gates_.Validate().ok());
}

TEST_F(FeatureGatesTest, UnknownNameIsDisabledAndNotKnown) {
  EXPECT_FALSE(gates_.Enabled("NoSuchGate"));
  EXPECT_FALSE(gates_.IsKnown("NoSuchGate"));
  EXPECT_TRUE(gates_.IsKnown("DynamicMIG"));
}

struct SetCase {
  std::string name;
  std::string spec;
  std::map<std::string, bool> expect;  // gates to check after a successful Set
};

class FeatureGatesSetOkTest : public FeatureGatesTest,
                              public ::testing::WithParamInterface<SetCase> {};

TEST_P(FeatureGatesSetOkTest, Applies) {
  const SetCase& c = GetParam();
  ASSERT_TRUE(gates_.Set(c.spec).ok()) << gates_.Set(c.spec);
  for (const auto& [name, value] : c.expect) EXPECT_EQ(gates_.Enabled(name), value) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Table, FeatureGatesSetOkTest,
    ::testing::Values(
        SetCase{"Single", "DynamicMIG=true", {{"DynamicMIG", true}, {"MPSSupport", false}}},
        SetCase{"Whitespace",
                "  MPSSupport = true ,\tTimeSlicingSettings=  True ",
                {{"MPSSupport", true}, {"TimeSlicingSettings", true}}},
        SetCase{"TrailingAndEmptyEntries", "MPSSupport=true,,", {{"MPSSupport", true}}},
        SetCase{"Empty", "", {{"IMEXDaemonsWithDNSNames", true}}},
        SetCase{"GoBoolSpellings",
                "MPSSupport=1,TimeSlicingSettings=T",
                {{"MPSSupport", true}, {"TimeSlicingSettings", true}}},
        SetCase{"LastEntryWins", "MPSSupport=true,MPSSupport=false", {{"MPSSupport", false}}},
        SetCase{"LockedToItsDefault", "DoneThing=true", {{"DoneThing", true}}},
        SetCase{"Deprecated", "OldThing=true", {{"OldThing", true}}},
        // A dependency satisfied by a later entry: order must not matter.
        SetCase{"DependencyOrderIrrelevant",
                "DeviceMetadata=true,PassthroughSupport=true",
                {{"DeviceMetadata", true}, {"PassthroughSupport", true}}},
        SetCase{"DisableBothSidesOfDependency",
                "IMEXDaemonsWithDNSNames=false,ComputeDomainCliques=false",
                {{"IMEXDaemonsWithDNSNames", false}, {"ComputeDomainCliques", false}}},
        SetCase{"AllBetaOffKeepsExplicit",
                "AllBeta=false",
                {{"IMEXDaemonsWithDNSNames", false}, {"ComputeDomainCliques", false}}},
        SetCase{"AllAlphaSkipsLockedAndExplicit",
                "AllAlpha=true,DynamicMIG=false,NVMLDeviceHealthCheck=false,"
                "PassthroughSupport=true",
                {{"MPSSupport", true},
                 {"TimeSlicingSettings", true},
                 {"DeviceMetadata", true},
                 {"DynamicMIG", false},
                 {"DoneThing", true}}}),
    [](const ::testing::TestParamInfo<SetCase>& info) { return info.param.name; });

struct ErrorCase {
  std::string name;
  std::string spec;
  std::vector<std::string> substrings;  // all must appear in the message
};

class FeatureGatesSetErrorTest : public FeatureGatesTest,
                                 public ::testing::WithParamInterface<ErrorCase> {};

TEST_P(FeatureGatesSetErrorTest, FailsAndChangesNothing) {
  const ErrorCase& c = GetParam();
  const std::map<std::string, bool> before = gates_.ToMap();
  absl::Status s = gates_.Set(c.spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  for (const std::string& sub : c.substrings) EXPECT_THAT(s.message(), HasSubstr(sub));
  EXPECT_EQ(gates_.ToMap(), before) << "a failed Set must not change anything";
}

INSTANTIATE_TEST_SUITE_P(
    Table, FeatureGatesSetErrorTest,
    ::testing::Values(
        ErrorCase{"Unknown",
                  "MPSSupport=true,Bogus=true",
                  {"unknown feature gate \"Bogus\"", "known: ", "DynamicMIG"}},
        ErrorCase{"MissingValue", "MPSSupport", {"malformed", "MPSSupport=true"}},
        ErrorCase{"EmptyValue", "MPSSupport=", {"malformed", "MPSSupport"}},
        ErrorCase{"MissingName", "=true", {"missing gate name"}},
        ErrorCase{"BadBool", "MPSSupport=yes", {"\"yes\"", "MPSSupport", "true or false"}},
        ErrorCase{"LockedGA", "DoneThing=false", {"DoneThing", "locked to true"}},
        ErrorCase{"UnmetDependency",
                  "DeviceMetadata=true",
                  {"feature gate DeviceMetadata requires PassthroughSupport to also be enabled"}},
        ErrorCase{"DependencyOnDefaultTurnedOff",
                  "IMEXDaemonsWithDNSNames=false",
                  {"feature gate ComputeDomainCliques requires IMEXDaemonsWithDNSNames to also "
                   "be enabled"}},
        ErrorCase{"Exclusion",
                  "MPSSupport=true,DynamicMIG=true",
                  {"feature gate DynamicMIG is currently mutually exclusive with MPSSupport"}},
        ErrorCase{"AllViolationsReported",
                  "DynamicMIG=true,PassthroughSupport=true,"
                  "NVMLDeviceHealthCheck=true",
                  {"DynamicMIG is currently mutually exclusive with PassthroughSupport",
                   "DynamicMIG is currently mutually exclusive with NVMLDeviceHealthCheck",
                   "PassthroughSupport is currently mutually exclusive with "
                   "NVMLDeviceHealthCheck"}},
        ErrorCase{"AllAlphaHitsExclusions", "AllAlpha=true", {"mutually exclusive"}}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

TEST_F(FeatureGatesTest, SetCallsAccumulate) {
  ASSERT_TRUE(gates_.Set("PassthroughSupport=true").ok());
  // Satisfied by the earlier call.
  ASSERT_TRUE(gates_.Set("DeviceMetadata=true").ok());
  EXPECT_TRUE(gates_.Enabled("PassthroughSupport"));
  EXPECT_TRUE(gates_.Enabled("DeviceMetadata"));
  // Turning the requirement off now breaks DeviceMetadata and is refused.
  EXPECT_FALSE(gates_.Set("PassthroughSupport=false").ok());
  EXPECT_TRUE(gates_.Enabled("PassthroughSupport"));
}

TEST_F(FeatureGatesTest, SetWithoutConstraintChecksLeavesThemToValidate) {
  ASSERT_TRUE(gates_.SetWithoutConstraintChecks("DeviceMetadata=true").ok());
  EXPECT_TRUE(gates_.Enabled("DeviceMetadata"));
  EXPECT_THAT(gates_.Validate().message(), HasSubstr("DeviceMetadata requires PassthroughSupport"));
  // Parsing errors and locks are still checked.
  EXPECT_FALSE(gates_.SetWithoutConstraintChecks("Bogus=true").ok());
  EXPECT_FALSE(gates_.SetWithoutConstraintChecks("DoneThing=false").ok());
}

TEST_F(FeatureGatesTest, SetFromMap) {
  ASSERT_TRUE(gates_.SetFromMap({{"PassthroughSupport", true}, {"DeviceMetadata", true}}).ok());
  EXPECT_TRUE(gates_.Enabled("DeviceMetadata"));
  EXPECT_FALSE(gates_.SetFromMap({{"Nope", true}}).ok());
}

TEST_F(FeatureGatesTest, ToStringRoundTrips) {
  ASSERT_TRUE(gates_.Set("MPSSupport=true,AllAlpha=false").ok());
  const std::string text = gates_.ToString();
  EXPECT_THAT(text, AllOf(HasSubstr("AllAlpha=false"), HasSubstr("AllBeta=false"),
                          HasSubstr("MPSSupport=true"), HasSubstr("DynamicMIG=false"),
                          HasSubstr("IMEXDaemonsWithDNSNames=true")));
  FeatureGates other;
  RegisterDriverGates(other);
  ASSERT_TRUE(other.Set(text).ok()) << other.Set(text);
  EXPECT_EQ(other.ToMap(), gates_.ToMap());
}

TEST_F(FeatureGatesTest, KnownGatesHelpListsEveryGateSorted) {
  const std::string help = gates_.KnownGatesHelp();
  EXPECT_THAT(help, HasSubstr("AllAlpha=true|false (ALPHA - default=false)"));
  EXPECT_THAT(help, HasSubstr("AllBeta=true|false (BETA - default=false)"));
  EXPECT_THAT(help, HasSubstr("ComputeDomainCliques=true|false (BETA - default=true) requires "
                              "IMEXDaemonsWithDNSNames\n"));
  EXPECT_THAT(help, HasSubstr("DoneThing=true|false (GA - default=true, locked): graduated\n"));
  EXPECT_THAT(help, HasSubstr("OldThing=true|false (DEPRECATED - default=false)\n"));
  EXPECT_THAT(help, HasSubstr("DynamicMIG=true|false (ALPHA - default=false) excludes "
                              "PassthroughSupport,NVMLDeviceHealthCheck,MPSSupport\n"));
  // One line per gate (10 + AllAlpha + AllBeta), sorted.
  std::vector<std::string> names;
  size_t start = 0;
  while (start < help.size()) {
    size_t end = help.find('\n', start);
    names.push_back(help.substr(start, help.find('=', start) - start));
    start = end + 1;
  }
  EXPECT_EQ(names.size(), 12u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

// A gate whose capability the binary lacks keeps its default: any other value fails with the
// reason and the gates that may be changed, AllAlpha skips it, and its default may be restated.
TEST(FeatureGatesUnavailableTest, OnlyTheDefaultIsAccepted) {
  FeatureGates g;
  ASSERT_TRUE(g.Register("Works", {.stage = FeatureStage::kAlpha}).ok());
  ASSERT_TRUE(g.Register("Missing", {.stage = FeatureStage::kAlpha,
                                     .unavailable = "not available in this version of x (not "
                                                    "implemented yet)"})
                  .ok());
  ASSERT_TRUE(g.Register("MissingOn", {.stage = FeatureStage::kBeta,
                                       .default_value = true,
                                       .unavailable = "not available here"})
                  .ok());
  ASSERT_TRUE(
      g.Register("Locked",
                 {.stage = FeatureStage::kGA, .default_value = true, .lock_to_default = true})
          .ok());
  absl::Status s = g.Set("Works=true,Missing=true");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "Missing=true: not available in this version of x (not implemented yet); allowed "
            "gates: Works");
  EXPECT_FALSE(g.Enabled("Works")) << "all or nothing";
  EXPECT_EQ(g.SetWithoutConstraintChecks("MissingOn=false").message(),
            "MissingOn=false: not available here; allowed gates: Works");
  EXPECT_FALSE(g.SetFromMap({{"Missing", true}}).ok());
  // Restating the default is fine.
  ASSERT_TRUE(g.Set("Missing=false,MissingOn=true").ok());
  ASSERT_TRUE(g.Set("AllAlpha=true,AllBeta=false").ok());
  EXPECT_TRUE(g.Enabled("Works"));
  EXPECT_FALSE(g.Enabled("Missing"));
  EXPECT_TRUE(g.Enabled("MissingOn"));
  EXPECT_THAT(g.KnownGatesHelp(),
              HasSubstr("Missing=true|false (ALPHA - default=false, not available)\n"));
}

TEST(FeatureGatesRegisterTest, RejectsBadRegistrations) {
  FeatureGates g;
  ASSERT_TRUE(g.Register("A", {}).ok());
  EXPECT_EQ(g.Register("A", {}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(g.Register("", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.Register("has space", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.Register("x=y", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.Register("AllAlpha", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.AddDependency("A", "Missing").code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(g.AddDependency("Missing", "A").message(), HasSubstr("Missing"));
  EXPECT_EQ(g.AddMutualExclusion("A", "Missing").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(g.AddDependency("A", "A").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.AddMutualExclusion("A", "A").code(), absl::StatusCode::kInvalidArgument);
}

TEST(FeatureStageNameTest, Names) {
  EXPECT_EQ(FeatureStageName(FeatureStage::kAlpha), "ALPHA");
  EXPECT_EQ(FeatureStageName(FeatureStage::kBeta), "BETA");
  EXPECT_EQ(FeatureStageName(FeatureStage::kGA), "GA");
  EXPECT_EQ(FeatureStageName(FeatureStage::kDeprecated), "DEPRECATED");
}

TEST_F(FeatureGatesTest, ConcurrentReadersSeeConsistentValues) {
  std::vector<std::thread> readers;
  std::atomic<bool> stop{false};
  std::atomic<int> inconsistent{0};
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        // DeviceMetadata is only ever on together with PassthroughSupport.
        std::map<std::string, bool> m = gates_.ToMap();
        if (m["DeviceMetadata"] && !m["PassthroughSupport"]) ++inconsistent;
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(gates_.Set("PassthroughSupport=true,DeviceMetadata=true").ok());
    ASSERT_TRUE(gates_.Set("DeviceMetadata=false,PassthroughSupport=false").ok());
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(inconsistent.load(), 0);
}

}  // namespace
}  // namespace dra
