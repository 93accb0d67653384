#include "lib/checkpoint/format.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::checkpoint {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Contents Sample() {
  Contents c;
  c.node_boot_id = "0d9b7b8e-boot";
  PreparedClaim a{.uid = "uid-a",
                  .namespace_name = "ns",
                  .name = "claim-a",
                  .state = ClaimState::kPrepareCompleted,
                  .allocation = Json::parse(R"({"devices":{"results":[{"device":"gpu-0"}]}})"),
                  .prepared_devices = Json::parse(R"([{"gpu":{"uuid":"GPU-1"}}])")};
  PreparedClaim b{.uid = "uid-b", .state = ClaimState::kPrepareStarted};
  c.claims = {{a.uid, a}, {b.uid, b}};
  return c;
}

// "steps" (added in format version 1 without a bump): kept when present, absent (null) in
// entries written without it, and left out of the text when null, so that an entry without steps
// is written exactly as before.
TEST(EncodeCheckpoint, StepsRoundTripAndStayOptional) {
  Contents c;
  c.node_boot_id = "b1";
  c.claims["u1"] = {.uid = "u1",
                    .state = ClaimState::kPrepareStarted,
                    .steps = Json::parse(R"([{"name":"timeSlicing","state":"begun"}])")};
  c.claims["u2"] = {.uid = "u2", .state = ClaimState::kPrepareCompleted};
  absl::StatusOr<std::string> text = EncodeCheckpoint(c);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr(R"("steps": [)"));
  absl::StatusOr<Contents> back = DecodeCheckpoint(*text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  EXPECT_TRUE(back->claims.at("u2").steps.is_null());
  Json u2 = Json::parse(*text)["data"]["preparedClaims"]["u2"];
  EXPECT_FALSE(u2.contains("steps")) << u2.dump();
}

TEST(Fnv1a64, KnownVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(EncodeCheckpoint, GoldenText) {
  Contents c;
  c.node_boot_id = "b1";
  c.claims["u1"] = {.uid = "u1", .name = "n", .state = ClaimState::kPrepareStarted};
  absl::StatusOr<std::string> text = EncodeCheckpoint(c);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string canonical =
      R"({"nodeBootID":"b1","preparedClaims":{"u1":{"name":"n","state":"PrepareStarted"}}})";
  char checksum[17];
  snprintf(checksum, sizeof(checksum), "%016llx",
           static_cast<unsigned long long>(Fnv1a64(canonical)));
  EXPECT_EQ(*text, absl::StrReplaceAll(R"({
  "version": 1,
  "checksum": "fnv1a64:SUM",
  "data": {
    "nodeBootID": "b1",
    "preparedClaims": {
      "u1": {
        "name": "n",
        "state": "PrepareStarted"
      }
    }
  }
}
)",
                                       {{"SUM", checksum}}));
}

TEST(DecodeCheckpoint, RoundTrips) {
  absl::StatusOr<std::string> text = EncodeCheckpoint(Sample());
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<Contents> decoded = DecodeCheckpoint(*text);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Sample());
}

TEST(DecodeCheckpoint, ReformattingKeepsTheChecksumValid) {
  absl::StatusOr<std::string> text = EncodeCheckpoint(Sample());
  ASSERT_TRUE(text.ok());
  const std::string compact = Json::parse(*text).dump();  // different whitespace and key order
  absl::StatusOr<Contents> decoded = DecodeCheckpoint(compact);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Sample());
}

TEST(DecodeCheckpoint, IgnoresUnknownFieldsCoveredByTheChecksum) {
  Json data = {{"nodeBootID", "b"},
               {"future", 1},
               {"preparedClaims", {{"u", {{"state", "PrepareCompleted"}, {"extra", true}}}}}};
  char sum[17];
  snprintf(sum, sizeof(sum), "%016llx", static_cast<unsigned long long>(Fnv1a64(data.dump())));
  Json file = {{"version", 1}, {"checksum", std::string("fnv1a64:") + sum}, {"data", data}};
  absl::StatusOr<Contents> decoded = DecodeCheckpoint(file.dump());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->claims.at("u").state, ClaimState::kPrepareCompleted);
}

TEST(DecodeCheckpoint, ChecksumMismatchReportsBothSums) {
  absl::StatusOr<std::string> text = EncodeCheckpoint(Sample());
  ASSERT_TRUE(text.ok());
  const std::string tampered = absl::StrReplaceAll(*text, {{"claim-a", "claim-x"}});
  DecodeDiagnostics diag;
  absl::StatusOr<Contents> decoded = DecodeCheckpoint(tampered, &diag);
  ASSERT_FALSE(decoded.ok());
  EXPECT_TRUE(absl::IsDataLoss(decoded.status()));
  EXPECT_THAT(std::string(decoded.status().message()),
              HasSubstr("checksum mismatch: stored fnv1a64:"));
  EXPECT_NE(diag.stored_checksum, diag.computed_checksum);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(diag.computed_checksum));
  EXPECT_FALSE(diag.parse_error_offset.has_value());
}

struct BadCase {
  std::string name;
  std::string text;
  absl::StatusCode code;
  std::string error;
};

class DecodeCheckpointErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(DecodeCheckpointErrors, Classifies) {
  absl::StatusOr<Contents> decoded = DecodeCheckpoint(GetParam().text);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), GetParam().code) << decoded.status();
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(GetParam().error));
}

// A valid file around `data` (so that only the shape of data is wrong).
std::string WithData(const Json& data) {
  char sum[17];
  snprintf(sum, sizeof(sum), "%016llx", static_cast<unsigned long long>(Fnv1a64(data.dump())));
  return Json{{"version", 1}, {"checksum", std::string("fnv1a64:") + sum}, {"data", data}}.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DecodeCheckpointErrors,
    ::testing::Values(
        BadCase{"Empty", "", absl::StatusCode::kDataLoss, "malformed JSON at byte 0"},
        BadCase{"Truncated", R"({"version": 1, "checks)", absl::StatusCode::kDataLoss,
                "malformed JSON at byte 22: syntax error while parsing object key"},
        BadCase{"Garbage",
                "\x7f"
                "ELF\x02\x01",
                absl::StatusCode::kDataLoss, "malformed JSON"},
        BadCase{"NotObject", "[1]", absl::StatusCode::kDataLoss, "top level: expected object"},
        BadCase{"GoDriverFormat", R"({"checksum":123,"v2":{"preparedClaims":{}}})",
                absl::StatusCode::kDataLoss, "version: missing"},
        BadCase{"VersionString", R"({"version":"1"})", absl::StatusCode::kDataLoss,
                "version: expected a positive integer, got \"1\""},
        BadCase{"VersionZero", R"({"version":0})", absl::StatusCode::kDataLoss,
                "version: expected a positive integer, got 0"},
        BadCase{"NewerVersion", R"({"version":2,"whatever":true})",
                absl::StatusCode::kFailedPrecondition,
                "checkpoint format version 2 is newer than the newest this plugin reads (1)"},
        BadCase{"NoChecksum", R"({"version":1,"data":{}})", absl::StatusCode::kDataLoss,
                "checksum: missing"},
        BadCase{"NoData", R"({"version":1,"checksum":"fnv1a64:0"})", absl::StatusCode::kDataLoss,
                "data: missing"},
        BadCase{"DataNotObject", WithData(Json::array()), absl::StatusCode::kDataLoss,
                "data: expected object"},
        BadCase{"ClaimsNotObject", WithData({{"preparedClaims", 1}}), absl::StatusCode::kDataLoss,
                "data.preparedClaims: expected object"},
        BadCase{"ClaimNotObject", WithData({{"preparedClaims", {{"u", 1}}}}),
                absl::StatusCode::kDataLoss, "data.preparedClaims[\"u\"]: expected object"},
        BadCase{"MissingState", WithData({{"preparedClaims", {{"u", Json::object()}}}}),
                absl::StatusCode::kDataLoss, "data.preparedClaims[\"u\"].state: missing"},
        BadCase{"BadState", WithData({{"preparedClaims", {{"u", {{"state", "Done"}}}}}}),
                absl::StatusCode::kDataLoss,
                "state: expected \"PrepareStarted\" or \"PrepareCompleted\", got \"Done\""},
        BadCase{"NameNotString",
                WithData({{"preparedClaims", {{"u", {{"state", "PrepareStarted"}, {"name", 1}}}}}}),
                absl::StatusCode::kDataLoss, "data.preparedClaims[\"u\"].name: expected string"},
        BadCase{"BootIdNotString", WithData({{"nodeBootID", 1}}), absl::StatusCode::kDataLoss,
                "data.nodeBootID: expected string"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

TEST(EncodeCheckpoint, RejectsMismatchedUidAndInvalidUtf8) {
  Contents c;
  c.claims["a"] = {.uid = "b"};
  EXPECT_FALSE(EncodeCheckpoint(c).ok());
  Contents d;
  d.claims["a"] = {.uid = "a", .prepared_devices = Json("\xff")};
  absl::StatusOr<std::string> text = EncodeCheckpoint(d);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
}

}  // namespace
}  // namespace dra::checkpoint
