#include "lib/checkpoint/go_format.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/checkpoint/go_test_files.h"

namespace dra::checkpoint {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(GoFormatTest, Fnv1a32KnownAnswers) {
  EXPECT_EQ(Fnv1a32(""), 0x811c9dc5u);
  EXPECT_EQ(Fnv1a32("a"), 0xe40c292cu);
  EXPECT_EQ(Fnv1a32("foobar"), 0xbf9cf968u);
}

TEST(GoFormatTest, ChecksumIsOverTheSpewRenderingOfTheBytes) {
  // "{}" is bytes 123 125.
  EXPECT_EQ(GoChecksum("{}"), Fnv1a32("([]uint8)[123 125]"));
  EXPECT_EQ(GoChecksum(""), Fnv1a32("([]uint8)[]"));
  EXPECT_EQ(GoChecksum("{}"), testing_go::Checksum("{}"));
}

TEST(GoFormatTest, MarshalEscapesAsGoDoes) {
  nlohmann::ordered_json v = nlohmann::ordered_json::object();
  v["z"] = "<a&b>\n\t\x01\"\\ \xe2\x80\xa8 \xc3\xa9";
  v["a"] = nlohmann::ordered_json::array({1, true, nullptr});
  EXPECT_EQ(GoJsonMarshal(v), R"({"z":"\u003ca\u0026b\u003e\n\t\u0001\"\\ \u2028 )"
                              "\xc3\xa9"
                              R"(","a":[1,true,null]})");
}

// Newer Go drivers write a "v3" beside "v1" and "v2" and leave it out of the top-level checksum,
// as they leave "v2" out; "v2" is still what is read.
TEST(GoFormatTest, TopLevelChecksumLeavesOutV3) {
  std::string text = testing_go::File(
      testing_go::V2Section("boot-1", {testing_go::GpuClaimV2("uid-1", "PrepareCompleted")}),
      testing_go::V1Section({testing_go::GpuClaimV1("uid-1")}));
  ASSERT_EQ(text.back(), '}');
  text.insert(text.size() - 1, R"(,"v3":{"checksum":1,"preparedClaims":{}})");
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(text);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->layout, "v2");
  EXPECT_EQ(cp->claims.count("uid-1"), 1u);
}

TEST(GoFormatTest, DecodesV2WithStartedAndCompletedClaims) {
  const std::string text = testing_go::File(
      testing_go::V2Section("boot-1", {testing_go::GpuClaimV2("uid-1", "PrepareCompleted"),
                                       testing_go::StartedClaimV2("uid-2", "ns", "c2")}),
      testing_go::V1Section({testing_go::GpuClaimV1("uid-1")}));
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(text);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->layout, "v2");
  EXPECT_EQ(cp->node_boot_id, "boot-1");
  ASSERT_EQ(cp->claims.size(), 2u);
  const GoClaim& done = cp->claims.at("uid-1");
  EXPECT_EQ(done.uid, "uid-1");
  EXPECT_EQ(done.state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(done.name, "");
  EXPECT_EQ(done.status["allocation"]["devices"]["results"][0]["device"], "gpu-0");
  ASSERT_TRUE(done.prepared_devices.is_array());
  EXPECT_EQ(done.prepared_devices[0]["devices"][0]["gpu"]["info"]["uuid"], "GPU-0000");
  EXPECT_EQ(done.prepared_devices[0]["configState"]["timeSliceApplied"], true);
  const GoClaim& started = cp->claims.at("uid-2");
  EXPECT_EQ(started.state, ClaimState::kPrepareStarted);
  EXPECT_EQ(started.namespace_name, "ns");
  EXPECT_EQ(started.name, "c2");
  EXPECT_TRUE(started.prepared_devices.is_null());
  EXPECT_TRUE(LooksLikeGoCheckpoint(text));
}

TEST(GoFormatTest, V1OnlyFileHasEveryClaimCompletedAndNoBootId) {
  const std::string text =
      testing_go::File("", testing_go::V1Section({testing_go::GpuClaimV1("uid-1")}));
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(text);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->layout, "v1");
  EXPECT_EQ(cp->node_boot_id, "");
  ASSERT_EQ(cp->claims.size(), 1u);
  EXPECT_EQ(cp->claims.at("uid-1").state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(cp->claims.at("uid-1").prepared_devices[0]["devices"][0]["gpu"]["device"]["DeviceName"],
            "gpu-0");
}

TEST(GoFormatTest, EmptyV2FileDecodes) {
  const std::string text = testing_go::File(testing_go::V2Section("boot-9", {}), "");
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(text);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE(cp->claims.empty());
  EXPECT_EQ(cp->node_boot_id, "boot-9");
}

TEST(GoFormatTest, ReindentedFileStillVerifies) {
  const std::string text = testing_go::File(
      testing_go::V2Section("boot-1", {testing_go::GpuClaimV2("uid-1", "PrepareCompleted")}),
      testing_go::V1Section({testing_go::GpuClaimV1("uid-1")}));
  const std::string pretty = nlohmann::ordered_json::parse(text).dump(4);
  ASSERT_NE(pretty, text);
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(pretty);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->claims.size(), 1u);
}

TEST(GoFormatTest, ChangedV1ValueFailsTheTopLevelChecksum) {
  const std::string text = testing_go::File(
      testing_go::V2Section("boot-1", {testing_go::GpuClaimV2("uid-1", "PrepareCompleted")}),
      testing_go::V1Section({testing_go::GpuClaimV1("uid-1")}));
  // The v1 section is the first to mention the device; change it there only.
  const size_t at = text.find("\"v1\"");
  ASSERT_NE(at, std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("GPU-0000", at), 8, "GPU-9999");
  DecodeDiagnostics diag;
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(bad, &diag);
  ASSERT_TRUE(absl::IsDataLoss(cp.status())) << cp.status();
  EXPECT_THAT(cp.status().message(), HasSubstr("top-level checksum mismatch"));
  EXPECT_THAT(diag.stored_checksum, HasSubstr("go-fnv1a32:"));
  EXPECT_NE(diag.stored_checksum, diag.computed_checksum);
  EXPECT_TRUE(LooksLikeGoCheckpoint(bad));
}

TEST(GoFormatTest, ChangedV2ValueFailsTheV2Checksum) {
  const std::string text = testing_go::File(
      testing_go::V2Section("boot-1", {testing_go::StartedClaimV2("uid-2", "ns", "c2")}), "");
  const std::string bad = absl::StrReplaceAll(text, {{"\"c2\"", "\"c3\""}});
  ASSERT_NE(bad, text);
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(bad);
  ASSERT_TRUE(absl::IsDataLoss(cp.status())) << cp.status();
  EXPECT_THAT(cp.status().message(), HasSubstr("v2 checksum mismatch"));
}

TEST(GoFormatTest, UnknownStateIsCorrupt) {
  const std::string text = testing_go::File(
      testing_go::V2Section("boot-1", {testing_go::GpuClaimV2("uid-1", "Prepared")}), "");
  absl::StatusOr<GoCheckpoint> cp = DecodeGoCheckpoint(text);
  ASSERT_TRUE(absl::IsDataLoss(cp.status())) << cp.status();
  EXPECT_THAT(cp.status().message(), HasSubstr("unknown state \"Prepared\""));
}

TEST(GoFormatTest, OtherFilesDoNotLookLikeGoCheckpoints) {
  EXPECT_FALSE(LooksLikeGoCheckpoint(R"({"version":1,"checksum":"fnv1a64:00","data":{}})"));
  EXPECT_FALSE(LooksLikeGoCheckpoint("{"));
  EXPECT_FALSE(LooksLikeGoCheckpoint(R"({"checksum":1})"));
  EXPECT_FALSE(LooksLikeGoCheckpoint(R"({"checksum":"1","v2":{}})"));
  EXPECT_TRUE(LooksLikeGoCheckpoint(R"({"checksum":1,"v2":{"preparedClaims":{}}})"));
}

}  // namespace
}  // namespace dra::checkpoint
