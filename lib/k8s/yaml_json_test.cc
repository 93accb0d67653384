// YamlToJson (yaml_json.h): manifests typed as kubectl types them.

#include "lib/k8s/yaml_json.h"

#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using json = nlohmann::json;

TEST(YamlToJsonTest, PlainScalarsAreTypedQuotedOnesStayStrings) {
  absl::StatusOr<json> j = YamlToJson(
      "a: 1\nb: \"1\"\nc: true\nd: 'false'\ne: null\nf: [x, 2]\ng: -3\nh: 1.5\ni: ~\nj: +7\n"
      "k: 12345678901234567890\nl: '-'\nm: !!str 5\n");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*j, json::parse(R"({"a":1,"b":"1","c":true,"d":"false","e":null,"f":["x",2],"g":-3,
                               "h":"1.5","i":null,"j":7,"k":"12345678901234567890","l":"-",
                               "m":"5"})"));
}

TEST(YamlToJsonTest, NullMembersAreDroppedOnRequest) {
  absl::StatusOr<json> j =
      YamlToJson("a: null\nb: {c: ~, d: 1}\ne: [null]\n", {.drop_null_members = true});
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*j, json::parse(R"({"b":{"d":1},"e":[null]})"));
}

TEST(YamlToJsonTest, MalformedYamlIsInvalidArgument) {
  absl::StatusOr<json> j = YamlToJson("a: [1, 2");
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(YamlDocumentsToJson("a: 1\n---\nb: [\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(YamlDocumentsToJsonTest, EveryDocumentButEmptyOnes) {
  absl::StatusOr<std::vector<json>> docs = YamlDocumentsToJson("---\na: 1\n---\n---\nb: x\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0], json::parse(R"({"a":1})"));
  EXPECT_EQ((*docs)[1], json::parse(R"({"b":"x"})"));
}

}  // namespace
}  // namespace dra::k8s
