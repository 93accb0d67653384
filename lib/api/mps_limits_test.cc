// MPS pinned-memory limits: MiB conversion and resolution of keys against the group's devices.

#include "lib/api/mps_limits.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/errors.h"

namespace dra::api {
namespace {

k8s::Quantity Q(const char* text) {
  absl::StatusOr<k8s::Quantity> q = k8s::Quantity::Parse(text);
  EXPECT_TRUE(q.ok()) << text;
  return q.value_or(k8s::Quantity());
}

struct MiBRow {
  const char* quantity;
  int64_t mib;
};

class ApiQuantityToMiBTest : public ::testing::TestWithParam<MiBRow> {};

TEST_P(ApiQuantityToMiBTest, TruncatesWholeBytes) {
  EXPECT_EQ(QuantityToMiB(Q(GetParam().quantity)), GetParam().mib) << GetParam().quantity;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ApiQuantityToMiBTest,
    ::testing::Values(MiBRow{"0", 0}, MiBRow{"1Ki", 0}, MiBRow{"1048575", 0}, MiBRow{"1048576", 1},
                      MiBRow{"1Mi", 1}, MiBRow{"2097151", 1}, MiBRow{"1.5Mi", 1},
                      MiBRow{"1M", 0},  // 10^6 bytes < 1Mi
                      MiBRow{"2M", 1}, MiBRow{"10Gi", 10240}, MiBRow{"4G", 3814},
                      MiBRow{"1Ti", 1048576},
                      // Value() rounds fractional bytes up first: 1048575.5 -> 1048576 bytes.
                      MiBRow{"1048575.5", 1}, MiBRow{"-1Gi", -1024}, MiBRow{"-1Ki", 0}));

TEST(ApiFormatMiBTest, UsesMSuffix) {
  EXPECT_EQ(FormatMiB(10240), "10240M");
  EXPECT_EQ(FormatMiB(1), "1M");
}

const std::vector<std::string> kGroup = {"GPU-c", "GPU-a", "MIG-b"};  // sorted: a, c, MIG-b

MpsConfig WithLimits(std::optional<const char*> def,
                     const std::map<std::string, const char*>& per) {
  MpsConfig mps;
  if (def.has_value()) mps.default_pinned_device_memory_limit = Q(*def);
  for (const auto& [k, v] : per) mps.default_per_device_pinned_memory_limit.emplace(k, Q(v));
  return mps;
}

TEST(ApiResolvePinnedMemoryLimitsTest, NothingSetGivesNoLimits) {
  auto limits = ResolvePinnedMemoryLimits(MpsConfig{}, kGroup);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_TRUE(limits->empty());
}

TEST(ApiResolvePinnedMemoryLimitsTest, DefaultAppliesToEveryDevice) {
  auto limits = ResolvePinnedMemoryLimits(WithLimits("10Gi", {}), kGroup);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(*limits,
            (std::map<std::string, int64_t>{{"GPU-a", 10240}, {"GPU-c", 10240}, {"MIG-b", 10240}}));
}

TEST(ApiResolvePinnedMemoryLimitsTest, IndexKeysFollowAscendingUuidOrder) {
  auto limits = ResolvePinnedMemoryLimits(WithLimits("4Gi", {{"0", "1Gi"}, {"2", "2Gi"}}), kGroup);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(*limits,
            (std::map<std::string, int64_t>{{"GPU-a", 1024}, {"GPU-c", 4096}, {"MIG-b", 2048}}));
}

TEST(ApiResolvePinnedMemoryLimitsTest, UuidKeysAndGoAtoiSpellings) {
  auto limits = ResolvePinnedMemoryLimits(
      WithLimits(std::nullopt, {{"GPU-c", "3Gi"}, {"+0", "1Gi"}, {"02", "2Gi"}}), kGroup);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(*limits,
            (std::map<std::string, int64_t>{{"GPU-a", 1024}, {"GPU-c", 3072}, {"MIG-b", 2048}}));
}

TEST(ApiResolvePinnedMemoryLimitsTest, SameDeviceTwiceWithSameLimitIsFine) {
  auto limits = ResolvePinnedMemoryLimits(
      WithLimits(std::nullopt, {{"0", "1Gi"}, {"GPU-a", "1024Mi"}}), kGroup);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(limits->at("GPU-a"), 1024);
}

TEST(ApiResolvePinnedMemoryLimitsTest, EmptyGroupSkipsTheDefaultLikeGo) {
  auto limits = ResolvePinnedMemoryLimits(WithLimits("1Ki", {}), {});
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_TRUE(limits->empty());
}

struct ResolveErrorRow {
  std::string name;
  MpsConfig mps;
  std::string message;
};

class ApiResolveErrorTest : public ::testing::TestWithParam<ResolveErrorRow> {};

TEST_P(ApiResolveErrorTest, FailsPermanently) {
  auto limits = ResolvePinnedMemoryLimits(GetParam().mps, kGroup);
  ASSERT_FALSE(limits.ok());
  EXPECT_EQ(limits.status().message(), GetParam().message);
  EXPECT_EQ(limits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsPermanentConfigError(limits.status()));
}

constexpr char kMap[] = "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit";

INSTANTIATE_TEST_SUITE_P(
    Rows, ApiResolveErrorTest,
    ::testing::Values(
        ResolveErrorRow{"DefaultTooLow", WithLimits("1Ki", {}),
                        "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid limit: default "
                        "value set too low: 1Ki"},
        ResolveErrorRow{"ValueTooLow", WithLimits(std::nullopt, {{"1", "100Ki"}}),
                        std::string(kMap) + "[\"1\"]: invalid limit: value set too low: 1: 100Ki"},
        ResolveErrorRow{"KeyNotUuidNorInteger", WithLimits(std::nullopt, {{"GPU-z", "1Gi"}}),
                        std::string(kMap) +
                            "[\"GPU-z\"]: invalid device: unable to parse key as an integer: "
                            "GPU-z"},
        ResolveErrorRow{
            "KeyWithSpaces", WithLimits(std::nullopt, {{" 1", "1Gi"}}),
            std::string(kMap) + "[\" 1\"]: invalid device: unable to parse key as an integer:  1"},
        ResolveErrorRow{"KeyOverflows", WithLimits(std::nullopt, {{"99999999999999999999", "1Gi"}}),
                        std::string(kMap) +
                            "[\"99999999999999999999\"]: invalid device: unable to parse key as "
                            "an integer: 99999999999999999999"},
        ResolveErrorRow{"IndexTooLarge", WithLimits(std::nullopt, {{"3", "1Gi"}}),
                        std::string(kMap) + "[\"3\"]: invalid device: invalid device index: 3"},
        ResolveErrorRow{"IndexNegative", WithLimits(std::nullopt, {{"-1", "1Gi"}}),
                        std::string(kMap) + "[\"-1\"]: invalid device: invalid device index: -1"},
        ResolveErrorRow{
            "SameDeviceTwoLimits", WithLimits(std::nullopt, {{"0", "1Gi"}, {"GPU-a", "2Gi"}}),
            std::string(kMap) + "[\"GPU-a\"]: device GPU-a already has limit 1024M from key \"0\"; "
                                "one device must not get two different limits"}),
    [](const auto& info) { return info.param.name; });

TEST(ApiResolvePinnedMemoryLimitsTest, PathFollowsTheCaller) {
  auto limits = ResolvePinnedMemoryLimits(WithLimits("1", {}), kGroup, "x.mps");
  ASSERT_FALSE(limits.ok());
  EXPECT_EQ(limits.status().message(),
            "x.mps.defaultPinnedDeviceMemoryLimit: invalid limit: default value set too low: 1");
}

}  // namespace
}  // namespace dra::api
