#include "lib/webhook/review_scan.h"

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/webhook/admission.h"
#include "nlohmann/json.hpp"

namespace dra::webhook {
namespace {

using nlohmann::json;

bool NlohmannAccepts(absl::string_view text) {
  return !json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false).is_discarded();
}

// A review shaped like what the API server sends for `kubectl apply` of a claim: the members the
// webhook reads sit among others it skips (managedFields, userInfo, annotations).
std::string KubectlReview(absl::string_view resource = "resourceclaims",
                          absl::string_view spec = R"({"devices": {"config": [{"opaque": {
      "driver": "gpu.nvidia.com", "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
      "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}]}})") {
  return absl::StrCat(R"({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
  "request": {"uid": "0b1c6f4e-2a4d", "kind": {"group": "resource.k8s.io", "version": "v1",
    "kind": "ResourceClaim"},
    "resource": {"group": "resource.k8s.io", "version": "v1", "resource": ")",
                      resource, R"("},
    "operation": "CREATE", "userInfo": {"username": "u", "groups": ["a", "b"],
      "extra": {"x": ["y"]}},
    "object": {"metadata": {"name": "c", "annotations": {"last": "{\"apiVersion\":\"v1\"}"},
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:devices": {}}},
          "spec": {"devices": {"config": "not this one: inside an array"}}}]},
      "spec": )",
                      spec, R"(, "status": {}},
    "oldObject": null, "dryRun": false, "options": {"n": -1.5, "m": 0, "k": [true, false, null]}}})");
}

TEST(ReviewScanTest, FindsTheMembersTheWebhookReads) {
  std::string text = KubectlReview();
  std::optional<ReviewScan> s = ScanReview(text);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->root, absl::string_view(text));
  EXPECT_EQ(s->api_version, "\"admission.k8s.io/v1\"");
  EXPECT_EQ(s->kind, "\"AdmissionReview\"");
  EXPECT_EQ(JsonStringValue(s->uid), "0b1c6f4e-2a4d");
  EXPECT_EQ(JsonStringValue(s->operation), "CREATE");
  EXPECT_EQ(JsonStringValue(s->group), "resource.k8s.io");
  EXPECT_EQ(JsonStringValue(s->version), "v1");
  EXPECT_EQ(JsonStringValue(s->resource_name), "resourceclaims");
  EXPECT_EQ(s->request.front(), '{');
  EXPECT_EQ(s->request.back(), '}');
  EXPECT_EQ(s->object.substr(0, 13), "{\"metadata\": ");
  // Not the "spec" inside managedFields' array: lookups go through objects only.
  EXPECT_EQ(json::parse(s->config)[0]["opaque"]["parameters"]["kind"], "GpuConfig");
  EXPECT_TRUE(s->template_spec.empty());
  EXPECT_TRUE(s->template_config.empty());
}

TEST(ReviewScanTest, TemplateChain) {
  std::string text =
      KubectlReview("resourceclaimtemplates", R"({"spec": {"devices": {"config": [1, 2]}}})");
  std::optional<ReviewScan> s = ScanReview(text);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->template_config, "[1, 2]");
  EXPECT_EQ(s->template_devices, R"({"config": [1, 2]})");
  EXPECT_TRUE(s->devices.empty());
}

TEST(ReviewScanTest, MembersOfNonObjectsAreAbsent) {
  std::optional<ReviewScan> s =
      ScanReview(R"({"request": {"resource": ["group", "v"], "object": "spec"}})");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->resource, R"(["group", "v"])");
  EXPECT_TRUE(s->group.empty());
  EXPECT_EQ(s->object, "\"spec\"");
  EXPECT_TRUE(s->spec.empty());
}

TEST(ReviewScanTest, AcceptsValidJsonItDecides) {
  for (const char* text : {
           "{}",
           " [ ] ",
           "0",
           "-0",
           "-12.50",
           "true",
           "null",
           "\"\"",
           R"("a\"\\\/\b\f\n\r\tb")",
           "{\"a\":[{},[],{\"b\":null}]}",
           "\t\r\n{ \"k\" : 1 }\n",
           "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",  // 2-, 3- and 4-byte UTF-8
           "\"\x7f\"",
       }) {
    EXPECT_TRUE(ScanReview(text).has_value()) << text;
    EXPECT_TRUE(NlohmannAccepts(text)) << text;
  }
}

TEST(ReviewScanTest, RefusesInvalidJson) {
  for (const std::string& text : std::vector<std::string>{
           "",
           " ",
           "{",
           "}",
           "[1,]",
           "{\"a\":1,}",
           "{\"a\" 1}",
           "{a:1}",
           "01",
           "1.",
           "-",
           "+1",
           ".5",
           "tru",
           "nul",
           "truex",
           "[1 2]",
           "{} {}",
           "\"abc",
           "\"\\x\"",
           "\"\\",
           "'a'",
           std::string("\"a\x01\""),
           std::string("\"\0\"", 3),
           "\"\xc0\xaf\"",          // overlong
           "\"\xed\xa0\x80\"",      // a surrogate
           "\"\xf4\x90\x80\x80\"",  // > U+10FFFF
           "\"\xe2\x82\"",
           "\"\x80\"",
           "\"\xff\"",
           "[1]]",
           "{\"a\":{\"b\":1}",
       }) {
    EXPECT_FALSE(ScanReview(text).has_value()) << text;
    EXPECT_FALSE(NlohmannAccepts(text)) << text;
  }
}

TEST(ReviewScanTest, LeavesSomeValidJsonToTheFullParser) {
  std::string deep = std::string(300, '[') + std::string(300, ']');
  std::string long_int(305, '1');  // 1.1e304: fits a double, but the scan does not count on it
  std::string wide = "{";
  for (int i = 0; i < 65; ++i) absl::StrAppend(&wide, i == 0 ? "" : ",", "\"k", i, "\":0");
  wide += "}";
  for (const std::string& text :
       {std::string(R"("\u0041")"), std::string("1e5"), std::string("[2.5E-3]"),
        std::string("\xef\xbb\xbf{}"), deep, long_int, wide,
        std::string(R"({"a": 1, "b": {"a": 2, "c": 3, "a": 4}})"),  // a duplicate
        std::string(R"({"a\/b": 1})")}) {
    EXPECT_FALSE(ScanReview(text).has_value()) << text;
    EXPECT_TRUE(NlohmannAccepts(text)) << text;
  }
  // nlohmann refuses a number that overflows a double; the scan never vouches for one.
  for (const std::string& text : {std::string("1e999"), std::string(400, '7')}) {
    EXPECT_FALSE(NlohmannAccepts(text));
    EXPECT_FALSE(ScanReview(text).has_value());
  }
}

TEST(ReviewScanTest, JsonStringValue) {
  EXPECT_EQ(JsonStringValue(R"("abc")"), "abc");
  EXPECT_EQ(JsonStringValue(R"("a\"b\\c\/d\n\t")"), "a\"b\\c/d\n\t");
  EXPECT_EQ(JsonStringValue(""), "");
  EXPECT_EQ(JsonStringValue("12"), "");
  EXPECT_EQ(JsonStringValue("{}"), "");
}

// The scan's answers against the whole document's, for reviews that take each branch.
class FastPathMatchesWholeDocument : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api::RegisterDriverFeatureGates(gates_).ok());
    ASSERT_TRUE(gates_.SetWithoutConstraintChecks("TimeSlicingSettings=true").ok());
  }
  void ExpectSame(const std::string& body) {
    AdmissionResult fast = HandleAdmissionReview("application/json", body, gates_);
    AdmissionResult whole = HandleAdmissionReviewWhole("application/json", body, gates_);
    EXPECT_EQ(fast.http_code, whole.http_code) << body;
    EXPECT_EQ(fast.content_type, whole.content_type) << body;
    EXPECT_EQ(fast.body, whole.body) << body;
    EXPECT_EQ(fast.outcome, whole.outcome) << body;
    EXPECT_EQ(fast.message, whole.message) << body;
  }
  FeatureGates gates_;
};

TEST_F(FastPathMatchesWholeDocument, Branches) {
  const std::string mps = R"({"devices": {"config": [{"opaque": {"driver": "gpu.nvidia.com",
      "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
      "sharing": {"strategy": "MPS"}}}}, {"opaque": {"driver": "other", "parameters": 1}},
      {"opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "Nope"}}}]}})";
  std::vector<std::string> bodies = {
      KubectlReview(),
      KubectlReview("resourceclaims", mps),
      KubectlReview("resourceclaimtemplates", absl::StrCat(R"({"spec": )", mps, "}")),
      KubectlReview("resourceclaimtemplates"),  // a claim's spec under a template: no configs
      KubectlReview("pods"),
      KubectlReview("resourceclaims", "null"),
      KubectlReview("resourceclaims", "[]"),
      KubectlReview("resourceclaims", R"({"devices": 7})"),
      KubectlReview("resourceclaims", R"({"devices": {"config": {}}})"),
      KubectlReview("resourceclaims", R"({"devices": {"config": null}})"),
      KubectlReview("resourceclaims", R"({"devices": {"config": [null, 1, {"opaque": []}]}})"),
      KubectlReview("resourceclaimtemplates", R"({"spec": "x"})"),
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "u\"1", "operation": "DELETE", "object": {"spec": 1}}})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "u", "object": null}})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"resource": {"group": "resource.k8s.io", "version": "v1",
          "resource": "resourceclaims"}, "object": 5}})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"resource": null, "object": {}}})",
      // The ways out to the whole document: errors, \u, exponents, duplicates.
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": 3})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})",
      R"({"apiVersion": "v1", "kind": "AdmissionReview", "request": {}})",
      R"(["not", "an", "object"])",
      "{",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "\u0075", "object": null}})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "u", "n": 1e3, "object": null}})",
      R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "request": {"uid": "a", "uid": "b", "object": null}})",
      KubectlReview("resourceclaims", R"({"devices": {"config": [{"opaque": {
          "driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig", "kind": "GpuConfig",
          "apiVersion": "resource.nvidia.com/v1beta1"}}}]}})"),
  };
  for (const std::string& body : bodies) ExpectSame(body);
  // The common case really takes the scan.
  EXPECT_TRUE(ScanReview(KubectlReview()).has_value());
}

TEST_F(FastPathMatchesWholeDocument, Mutations) {
  const std::vector<std::string> seeds = {
      KubectlReview(), KubectlReview("resourceclaimtemplates", R"({"spec": {"devices": {
      "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig",
      "apiVersion": "resource.nvidia.com/v1beta1", "sharing": {"strategy": "MPS"}}}}]}}})")};
  const std::vector<std::string> tokens = {
      "null",     "{}",         "[]",         "0",  "\"\"",     ",",  ":",
      "\"spec\"", "\"config\"", "\"object\"", "\\", "\xc3\xa9", "1e2"};
  std::mt19937 rng(20261126);
  for (int i = 0; i < 3000; ++i) {
    std::string body = seeds[rng() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      size_t pos = rng() % (body.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (pos < body.size()) body[pos] = static_cast<char>(rng());
          break;
        case 1:
          body.insert(pos, tokens[rng() % tokens.size()]);
          break;
        case 2:
          body.erase(pos, rng() % 8);
          break;
      }
    }
    ExpectSame(body);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace dra::webhook
