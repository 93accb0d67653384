#include "lib/common/json_access.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::json_access {
namespace {

using ::testing::HasSubstr;

TEST(JsonAccessTest, PathsBracketKeysThatAreNotPlainIdentifiers) {
  EXPECT_EQ(MemberPath("", "spec"), "spec");
  EXPECT_EQ(MemberPath("spec", "driver"), "spec.driver");
  EXPECT_EQ(MemberPath("metadata.labels", "a.b/c"), "metadata.labels[\"a.b/c\"]");
  EXPECT_EQ(MemberPath("x", "\n"), "x[\"\\n\"]");
  EXPECT_EQ(EntryPath("attributes", "index"), "attributes[\"index\"]");
  EXPECT_EQ(IndexPath("items", 3), "items[3]");
}

TEST(JsonAccessTest, TypeErrorsNameThePathAndBothTypes) {
  EXPECT_EQ(TypeError("metadata", "object", Json(5)).message(),
            "metadata: expected object, got integer");
  EXPECT_EQ(TypeError("", "object", Json::array()).message(), "expected object, got array");
  EXPECT_EQ(TypeError("a", "string", Json(true)).message(), "a: expected string, got boolean");
  EXPECT_EQ(TypeError("a", "string", Json(1.5)).message(), "a: expected string, got number");
  EXPECT_EQ(TypeError("a", "string", Json()).message(), "a: expected string, got null");
}

TEST(JsonAccessTest, ParseNeverThrows) {
  EXPECT_TRUE(Parse(R"({"a":[1,2,{"b":null}]})").ok());
  for (const std::string& bad : {std::string(""), std::string("{"), std::string("{\"a\":}"),
                                 std::string("\xff"), std::string("[1,]"), std::string("nul")}) {
    absl::StatusOr<Json> j = Parse(bad);
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(j.status().message()), HasSubstr("not valid JSON")) << bad;
  }
}

TEST(JsonAccessTest, ParseRefusesDeepNestingButNotBracketsInStrings) {
  std::string deep = std::string(kMaxDepth + 1, '[') + std::string(kMaxDepth + 1, ']');
  EXPECT_EQ(Parse(deep).status().message(), "JSON nested deeper than 512 levels");
  std::string ok = std::string(kMaxDepth, '[') + std::string(kMaxDepth, ']');
  EXPECT_TRUE(Parse(ok).ok());
  EXPECT_TRUE(Parse("\"" + std::string(10000, '[') + "\\\"\"").ok());
  EXPECT_FALSE(Parse(std::string(1 << 20, '{')).ok());
}

// `{"a":{"a":...1...}}`, `levels` objects deep.
std::string Nested(int levels) {
  std::string out;
  for (int i = 0; i < levels; ++i) out += R"({"a":)";
  out += "1";
  out += std::string(levels, '}');
  return out;
}

TEST(JsonAccessTest, ParseCuttingDeepCutsOnlyWhatIsTooDeepAndNamesWhere) {
  // A list page whose second item nests 10,000 levels (the API server's own limit), among
  // shallow ones: the page reads, the item is cut at the limit, the others are whole.
  std::string page =
      absl::StrCat(R"({"metadata":{"resourceVersion":"5"},"items":[{"x":[1,2]},)",
                   R"({"metadata":{"name":"deep"},"spec":)", Nested(10000), R"(},{"y":"[[[{{"}]})");
  std::set<std::string> cut_at;
  absl::StatusOr<Json> j = ParseCuttingDeep(page, kMaxDepth + 2, 2, &cut_at);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_THAT(cut_at, ::testing::ElementsAre("items[1]"));
  EXPECT_EQ((*j)["metadata"]["resourceVersion"], "5");
  EXPECT_EQ((*j)["items"][0], Json::parse(R"({"x":[1,2]})"));
  EXPECT_EQ((*j)["items"][1]["metadata"]["name"], "deep");
  EXPECT_EQ((*j)["items"][2], Json::parse(R"({"y":"[[[{{"})"));
  // Cut where the item's own depth passes the limit: 512 levels of the item are kept.
  const Json* v = &(*j)["items"][1];
  int depth = 1;
  while (v->is_object() && v->contains("spec")) v = &(*v)["spec"], ++depth;
  while (v->is_object() && v->contains("a")) v = &(*v)["a"], ++depth;
  EXPECT_TRUE(v->is_null());
  EXPECT_EQ(depth, kMaxDepth + 1);  // the null that replaced level 513
}

TEST(JsonAccessTest, ParseCuttingDeepWithinTheLimitIsParse) {
  std::set<std::string> cut_at;
  absl::StatusOr<Json> j = ParseCuttingDeep(Nested(kMaxDepth), kMaxDepth, 1, &cut_at);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_TRUE(cut_at.empty());
  EXPECT_EQ(*j, *Parse(Nested(kMaxDepth)));
  // Arrays are cut too; the path's steps stop at `report_steps`.
  std::string deep_array =
      R"({"object":{"k":)" + std::string(600, '[') + std::string(600, ']') + "}}";
  j = ParseCuttingDeep(deep_array, 10, 1, &cut_at);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_THAT(cut_at, ::testing::ElementsAre("object"));
}

TEST(JsonAccessTest, ParseCuttingDeepRefusesInvalidJsonAtAnyDepth) {
  std::set<std::string> cut_at;
  for (const std::string& bad :
       {Nested(600) + "x", Nested(600).substr(1), std::string(100000, '['), std::string("{")}) {
    absl::StatusOr<Json> j = ParseCuttingDeep(bad, kMaxDepth, 1, &cut_at);
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(j.status().message()), HasSubstr("not valid JSON"));
  }
}

TEST(JsonAccessTest, IntegersMustFit) {
  int64_t i64 = 0;
  EXPECT_TRUE(DecodeInt64(Json::parse("9223372036854775807"), "n", &i64).ok());
  EXPECT_EQ(DecodeInt64(Json::parse("18446744073709551615"), "n", &i64).message(),
            "n: integer out of range, 18446744073709551615 does not fit a 64-bit signed integer");
  EXPECT_EQ(DecodeInt64(Json::parse("5e1"), "n", &i64).message(),
            "n: expected integer, got number");
  int32_t i32 = 0;
  EXPECT_EQ(DecodeInt32(Json(int64_t{1} << 32), "n", &i32).message(),
            "n: integer out of range, 4294967296 does not fit a 32-bit signed integer");
  EXPECT_TRUE(DecodeInt32(Json(-5), "n", &i32).ok());
  EXPECT_EQ(i32, -5);
}

TEST(JsonAccessTest, CheckedMemberReads) {
  Json obj = Json::parse(R"({"s":"x","n":5,"b":true,"o":{},"a":[],"z":null})");
  EXPECT_EQ(*GetString(obj, "meta", "s"), "x");
  EXPECT_EQ(GetString(obj, "meta", "n").status().message(), "meta.n: expected string, got integer");
  EXPECT_EQ(GetString(obj, "meta", "z").status().message(), "meta.z: required field is missing");
  EXPECT_EQ(GetString(obj, "meta", "gone").status().message(),
            "meta.gone: required field is missing");
  EXPECT_EQ(*GetOptionalString(obj, "meta", "gone"), std::nullopt);
  EXPECT_NE(*GetObject(obj, "meta", "o"), nullptr);
  EXPECT_EQ(*GetOptionalObject(obj, "meta", "z"), nullptr);
  EXPECT_EQ(GetOptionalObject(obj, "meta", "a").status().message(),
            "meta.a: expected object, got array");
  EXPECT_NE(*GetOptionalArray(obj, "meta", "a"), nullptr);
  EXPECT_EQ(GetOptionalArray(obj, "", "o").status().message(), "o: expected array, got object");
  // The container itself has the wrong type.
  EXPECT_EQ(GetOptionalString(Json(5), "metadata", "uid").status().message(),
            "metadata: expected object, got integer");
  EXPECT_EQ(GetString(Json("x"), "", "uid").status().message(), "expected object, got string");
}

TEST(JsonAccessTest, LenientReadsFallBackOnWrongTypes) {
  Json obj = Json::parse(R"({"s":"x","n":5,"a":[1],"wrong":{}})");
  EXPECT_EQ(StringOr(obj, "s"), "x");
  EXPECT_EQ(StringOr(obj, "n", "?"), "?");
  EXPECT_EQ(StringOr(Json(5), "s", "?"), "?");
  EXPECT_EQ(IntOr(obj, "n"), 5);
  EXPECT_EQ(IntOr(obj, "s", -1), -1);
  EXPECT_EQ(ArrayOrEmpty(obj, "a").size(), 1u);
  EXPECT_TRUE(ArrayOrEmpty(obj, "wrong").empty());
  EXPECT_TRUE(MemberOrNull(Json::array(), "s").is_null());
  EXPECT_EQ(Find(obj, "missing"), nullptr);
}

}  // namespace
}  // namespace dra::json_access
