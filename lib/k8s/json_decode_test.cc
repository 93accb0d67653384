#include "lib/k8s/json_decode.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Type names and paths are tested with the common layer (lib/common/json_access_test.cc).

TEST(JsonDecodeTest, ReadsTypedMembers) {
  json j = json::parse(R"({
    "s": "text", "i": -5, "u": 7, "b": true, "q": "80Gi", "qn": 3,
    "os": "", "ob": false, "oi": 0,
    "list": ["a", "b"], "map": {"k": "v"}, "raw": {"any": [1, "x"]}
  })");
  absl::StatusOr<ObjectReader> r = ObjectReader::Create(j, "obj");
  ASSERT_TRUE(r.ok());
  std::string s;
  int64_t i = 0;
  int32_t u = 0;
  bool b = false;
  Quantity q;
  Quantity qn;
  std::optional<std::string> os;
  std::optional<bool> ob;
  std::optional<int64_t> oi;
  std::optional<std::string> absent;
  std::vector<std::string> list;
  std::map<std::string, std::string> map;
  json raw;
  ASSERT_TRUE(r->String("s", &s).ok());
  ASSERT_TRUE(r->Int64("i", &i).ok());
  ASSERT_TRUE(r->Int32("u", &u).ok());
  ASSERT_TRUE(r->Bool("b", &b).ok());
  ASSERT_TRUE(r->Quantity("q", &q).ok());
  ASSERT_TRUE(r->Quantity("qn", &qn).ok());
  ASSERT_TRUE(r->OptionalString("os", &os).ok());
  ASSERT_TRUE(r->OptionalBool("ob", &ob).ok());
  ASSERT_TRUE(r->OptionalInt64("oi", &oi).ok());
  ASSERT_TRUE(r->OptionalString("absent", &absent).ok());
  ASSERT_TRUE(r->StringList("list", &list).ok());
  ASSERT_TRUE(r->StringMap("map", &map).ok());
  ASSERT_TRUE(r->Raw("raw", &raw).ok());
  EXPECT_EQ(s, "text");
  EXPECT_EQ(i, -5);
  EXPECT_EQ(u, 7);
  EXPECT_TRUE(b);
  EXPECT_EQ(q.ToString(), "80Gi");
  EXPECT_EQ(qn.ToString(), "3");
  EXPECT_EQ(os, std::optional<std::string>(""));  // set-but-empty differs from unset
  EXPECT_EQ(ob, std::optional<bool>(false));
  EXPECT_EQ(oi, std::optional<int64_t>(0));
  EXPECT_FALSE(absent.has_value());
  EXPECT_EQ(list, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(map, (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_EQ(raw, json::parse(R"({"any": [1, "x"]})"));
  EXPECT_TRUE(r->UnknownFields().is_null());
}

TEST(JsonDecodeTest, NullAndAbsentLeaveDefaults) {
  json j = json::parse(R"({"name": null, "labels": null})");
  absl::StatusOr<ObjectReader> r = ObjectReader::Create(j, "");
  ASSERT_TRUE(r.ok());
  std::string name = "default";
  std::map<std::string, std::string> labels = {{"keep", "me"}};
  int64_t missing = 42;
  EXPECT_TRUE(r->String("name", &name).ok());
  EXPECT_TRUE(r->StringMap("labels", &labels).ok());
  EXPECT_TRUE(r->Int64("missing", &missing).ok());
  EXPECT_EQ(name, "default");
  EXPECT_EQ(labels.size(), 1u);
  EXPECT_EQ(missing, 42);

  // A null object reads as empty.
  json null_json;
  absl::StatusOr<ObjectReader> from_null = ObjectReader::Create(null_json, "status");
  ASSERT_TRUE(from_null.ok());
  EXPECT_TRUE(from_null->String("phase", &name).ok());
}

TEST(JsonDecodeTest, WrongTypesNameThePath) {
  using Read = std::function<absl::Status(ObjectReader&)>;
  const Read read_string = [](ObjectReader& r) {
    std::string v;
    return r.String("f", &v);
  };
  const Read read_int64 = [](ObjectReader& r) {
    int64_t v = 0;
    return r.Int64("f", &v);
  };
  const Read read_int32 = [](ObjectReader& r) {
    int32_t v = 0;
    return r.Int32("f", &v);
  };
  const Read read_bool = [](ObjectReader& r) {
    bool v = false;
    return r.Bool("f", &v);
  };
  const Read read_quantity = [](ObjectReader& r) {
    Quantity v;
    return r.Quantity("f", &v);
  };
  const Read read_list = [](ObjectReader& r) {
    std::vector<std::string> v;
    return r.StringList("f", &v);
  };
  const Read read_map = [](ObjectReader& r) {
    std::map<std::string, std::string> v;
    return r.StringMap("f", &v);
  };
  struct Case {
    const char* json_text;
    Read read;
    const char* want;
  };
  const Case cases[] = {
      {R"({"f": 1})", read_string, "spec.f: expected string, got integer"},
      {R"({"f": "1"})", read_int64, "spec.f: expected integer, got string"},
      {R"({"f": 1.5})", read_int64, "spec.f: expected integer, got number"},
      {R"({"f": "true"})", read_bool, "spec.f: expected boolean, got string"},
      {R"({"f": {}})", read_list, "spec.f: expected array, got object"},
      {R"({"f": ["a", 2]})", read_list, "spec.f[1]: expected string, got integer"},
      {R"({"f": []})", read_map, "spec.f: expected object, got array"},
      {R"({"f": {"k": true}})", read_map, "spec.f[\"k\"]: expected string, got boolean"},
      {R"({"f": 18446744073709551615})", read_int64,
       "spec.f: integer out of range, 18446744073709551615 does not fit a 64-bit signed integer"},
      {R"({"f": 4294967296})", read_int32,
       "spec.f: integer out of range, 4294967296 does not fit a 32-bit"},
      {R"({"f": "12 Gi"})", read_quantity, "spec.f: invalid quantity \"12 Gi\""},
      {R"({"f": true})", read_quantity,
       "spec.f: expected quantity string (e.g. \"10Gi\"), got boolean"},
  };
  for (const Case& c : cases) {
    json j = json::parse(c.json_text);
    absl::StatusOr<ObjectReader> r = ObjectReader::Create(j, "spec");
    ASSERT_TRUE(r.ok());
    absl::Status status = c.read(*r);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.json_text;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.want)) << c.json_text;
  }
}

TEST(JsonDecodeTest, CreateRejectsNonObjects) {
  json j = json::array();
  absl::StatusOr<ObjectReader> r = ObjectReader::Create(j, "spec.pool");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "spec.pool: expected object, got array");
}

TEST(JsonDecodeTest, CollectsUnknownFields) {
  json j = json::parse(R"({"name": "a", "future": {"x": 1}, "other": [true], "gone": null})");
  absl::StatusOr<ObjectReader> r = ObjectReader::Create(j, "");
  ASSERT_TRUE(r.ok());
  std::string name;
  ASSERT_TRUE(r->String("name", &name).ok());
  std::string gone;
  ASSERT_TRUE(r->String("gone", &gone).ok());
  EXPECT_EQ(r->UnknownFields(), json::parse(R"({"future": {"x": 1}, "other": [true]})"));
}

TEST(JsonDecodeTest, ListAndMapOfStructsUseElementPaths) {
  json j = json::parse(R"({"items": [{"n": 1}, {"n": "two"}]})");
  absl::StatusOr<ObjectReader> r = ObjectReader::Create(j, "spec");
  ASSERT_TRUE(r.ok());
  std::vector<int64_t> out;
  absl::Status status =
      r->List("items", &out, [](const json& e, const std::string& path, int64_t* n) {
        absl::StatusOr<ObjectReader> er = ObjectReader::Create(e, path);
        if (!er.ok()) return er.status();
        return er->Int64("n", n);
      });
  EXPECT_EQ(status.message(), "spec.items[1].n: expected integer, got string");
}

TEST(JsonDecodeTest, PutWritersOmitEmptyAndEraseStaleValues) {
  json obj = json::parse(R"({"s": "old", "i": 3, "b": true, "l": ["x"], "m": {"k": "v"},
                             "o": {"a": 1}, "r": 1, "keep": "me"})");
  PutString(obj, "s", "");
  PutInt64(obj, "i", 0);
  PutBool(obj, "b", false);
  PutStringList(obj, "l", {});
  PutStringMap(obj, "m", {});
  PutObject(obj, "o", json::object());
  PutRaw(obj, "r", json());
  PutOptionalString(obj, "os", std::nullopt);
  EXPECT_EQ(obj, json::parse(R"({"keep": "me"})"));

  PutString(obj, "s", "new");
  PutInt64(obj, "i", -1);
  PutBool(obj, "b", true);
  PutOptionalString(obj, "os", "");
  PutOptionalBool(obj, "ob", false);
  PutOptionalInt64(obj, "oi", 0);
  PutQuantityMap(obj, "q", {{"memory", *Quantity::Parse("81920Mi")}});
  PutRaw(obj, "r", json::object());
  EXPECT_EQ(obj, json::parse(R"({"keep": "me", "s": "new", "i": -1, "b": true, "os": "",
                                 "ob": false, "oi": 0, "q": {"memory": "80Gi"}, "r": {}})"));

  EXPECT_EQ(StartObject(json()), json::object());
  EXPECT_EQ(StartObject(json::parse(R"({"x": 1})")), json::parse(R"({"x": 1})"));
}

}  // namespace
}  // namespace dra::k8s
