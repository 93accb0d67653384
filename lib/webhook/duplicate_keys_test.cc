#include "lib/webhook/duplicate_keys.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "lib/api/config.h"

namespace dra::webhook {
namespace {

TEST(FindDuplicateKeyTest, Table) {
  struct Case {
    std::string json;
    std::optional<std::string> want;
  } cases[] = {
      {R"({})", std::nullopt},
      {R"({"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]})", std::nullopt},
      {R"({"a":1,"a":2})", "a"},
      {R"({"a":{"b":1,"c":{"d":1},"b":2}})", "a.b"},
      {R"({"x":[1,{"y":[{},{"k":1,"k":1}]}]})", "x[1].y[1].k"},
      // Keys of closed objects are forgotten; siblings do not clash.
      {R"({"a":{"k":1},"b":{"k":1},"k":{"k":{"k":1}}})", std::nullopt},
      // Escapes: the same key spelled two ways, and quotes/backslashes inside keys and values.
      {R"({"kind":1,"\u006bind":2})", "kind"},
      {R"({"a\"b":"}{,[","a\\":1,"v":"\\","a\"b":2})", R"(["a\"b"])"},
      {R"({"a.b":{"c d":1,"c d":2}})", R"(["a.b"]["c d"])"},
      {R"( [ {"a" : 1 , "a" : 2} ] )", "[0].a"},
      // The first duplicate in document order.
      {R"({"z":{"q":1,"q":1},"a":1,"a":1})", "z.q"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FindDuplicateKey(c.json), c.want) << c.json;
  }
}

// The scan and lib/api's strict parser agree on where the duplicate is.
TEST(FindDuplicateKeyTest, AgreesWithStrictParser) {
  for (const char* json : {R"({"a":{"b":[{"c":1,"c":2}]}})", R"({"request":{"uid":"x","uid":"y"}})",
                           R"({"p":{"apiVersion":"v","kind":"GpuConfig","kind":"GpuConfig"}})"}) {
    absl::StatusOr<nlohmann::json> strict = api::ParseJsonStrict(json);
    ASSERT_FALSE(strict.ok()) << json;
    std::optional<std::string> found = FindDuplicateKey(json);
    ASSERT_TRUE(found.has_value()) << json;
    EXPECT_EQ(std::string(strict.status().message()), *found + ": duplicate field");
  }
}

TEST(FindDuplicateKeyTest, MalformedTextDoesNotCrash) {
  for (const char* json : {"", "}", "]]]", "{\"a", "{\"a\\", "[,,,]", "{\"a\":1,,\"a\":2}"}) {
    (void)FindDuplicateKey(json);
  }
}

// Objects with many members (the hash set beyond 32 keys) find the same duplicates, escaped
// spellings included, and report the same paths.
TEST(FindDuplicateKeyTest, WideObjects) {
  auto wide = [](int n, const std::string& last_key) {
    std::string s = R"({"outer": {"nested": {"x": 1, "y": 2}, )";
    for (int i = 0; i < n; ++i) s += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
    return s + "\"" + last_key + "\": 0}}";
  };
  EXPECT_EQ(FindDuplicateKey(wide(5000, "last")), std::nullopt);
  EXPECT_EQ(FindDuplicateKey(wide(5000, "k17")), "outer.k17");
  EXPECT_EQ(FindDuplicateKey(wide(5000, "k4999")), "outer.k4999");
  EXPECT_EQ(FindDuplicateKey(wide(40, "nested")), "outer.nested");
  EXPECT_EQ(FindDuplicateKey(wide(40, R"(k\u0033)")), "outer.k3");  // "k3", escaped
  EXPECT_EQ(FindDuplicateKey(wide(31, "k0")), "outer.k0");          // at the switch to the set
  EXPECT_EQ(FindDuplicateKey(wide(32, "k0")), "outer.k0");
}

}  // namespace
}  // namespace dra::webhook
