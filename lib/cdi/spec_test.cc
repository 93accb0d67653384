#include "lib/cdi/spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cdi {
namespace {

using ::testing::HasSubstr;

Spec FullSpec() {
  Spec spec;
  spec.version = "0.7.0";
  spec.kind = "example.com/claim";
  spec.annotations = {{"example.com/owner", "test"}};
  Device dev;
  dev.name = "uid-gpu-0";
  dev.container_edits.device_nodes.push_back(
      {.path = "/dev/card0", .type = "c", .major = 195, .minor = 0, .file_mode = 0666});
  dev.container_edits.hooks.push_back({.hook_name = "createContainer",
                                       .path = "/usr/bin/hook",
                                       .args = {"hook", "x"},
                                       .env = {"DEBUG=1"},
                                       .timeout = 5});
  spec.devices.push_back(dev);
  spec.container_edits.env = {"A=1"};
  spec.container_edits.device_nodes.push_back(
      {.path = "/dev/ctl", .host_path = "/host/dev/ctl", .permissions = "rw", .uid = 0, .gid = 44});
  spec.container_edits.mounts.push_back(
      {.host_path = "/host/lib/a.so", .container_path = "/lib/a.so", .options = {"ro", "rbind"}});
  spec.container_edits.additional_gids = {44};
  return spec;
}

TEST(EncodeSpec, WritesCdiKeysInStructOrderAndOmitsEmptyFields) {
  EXPECT_EQ(EncodeSpec(FullSpec()), R"({
  "cdiVersion": "0.7.0",
  "kind": "example.com/claim",
  "annotations": {
    "example.com/owner": "test"
  },
  "devices": [
    {
      "name": "uid-gpu-0",
      "containerEdits": {
        "deviceNodes": [
          {
            "path": "/dev/card0",
            "type": "c",
            "major": 195,
            "minor": 0,
            "fileMode": 438
          }
        ],
        "hooks": [
          {
            "hookName": "createContainer",
            "path": "/usr/bin/hook",
            "args": [
              "hook",
              "x"
            ],
            "env": [
              "DEBUG=1"
            ],
            "timeout": 5
          }
        ]
      }
    }
  ],
  "containerEdits": {
    "env": [
      "A=1"
    ],
    "deviceNodes": [
      {
        "path": "/dev/ctl",
        "hostPath": "/host/dev/ctl",
        "permissions": "rw",
        "uid": 0,
        "gid": 44
      }
    ],
    "mounts": [
      {
        "hostPath": "/host/lib/a.so",
        "containerPath": "/lib/a.so",
        "options": [
          "ro",
          "rbind"
        ]
      }
    ],
    "additionalGids": [
      44
    ]
  }
}
)");
}

TEST(EncodeSpec, OmitsEmptySpecLevelEdits) {
  Spec spec;
  spec.version = "0.3.0";
  spec.kind = "example.com/claim";
  spec.devices.push_back({.name = "d", .container_edits = {.env = {"A=1"}}});
  EXPECT_EQ(SpecToJson(spec).dump(),
            R"({"cdiVersion":"0.3.0","kind":"example.com/claim","devices":[{"name":"d",)"
            R"("containerEdits":{"env":["A=1"]}}]})");
}

TEST(DecodeSpec, RoundTripsEveryField) {
  const Spec spec = FullSpec();
  absl::StatusOr<Spec> decoded = DecodeSpec(EncodeSpec(spec));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, spec);
}

TEST(DecodeSpec, NullMembersReadAsAbsent) {
  absl::StatusOr<Spec> decoded = DecodeSpec(
      R"({"cdiVersion":"0.3.0","kind":"a.com/b","annotations":null,"devices":[{"name":"d",)"
      R"("containerEdits":{"env":null,"deviceNodes":[{"path":"/dev/x","major":null}]}}]})");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->devices.size(), 1u);
  EXPECT_FALSE(decoded->devices[0].container_edits.device_nodes[0].major.has_value());
}

struct DecodeErrorCase {
  std::string name;
  std::string json;
  std::string error;
};

class DecodeSpecErrors : public ::testing::TestWithParam<DecodeErrorCase> {};

TEST_P(DecodeSpecErrors, NamesTheFieldPath) {
  absl::StatusOr<Spec> decoded = DecodeSpec(GetParam().json);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(decoded.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DecodeSpecErrors,
    ::testing::Values(
        DecodeErrorCase{"Malformed", R"({"kind": x})", "malformed JSON at byte 9: syntax error"},
        DecodeErrorCase{"Truncated", R"({"kind": "a)", "malformed JSON at byte"},
        DecodeErrorCase{"NotAnObject", "[]", "spec: expected object, got array"},
        DecodeErrorCase{"UnknownTopLevel", R"({"kind":"a.com/b","foo":1})", "foo: unknown field"},
        DecodeErrorCase{"WrongType", R"({"kind":1})", "kind: expected string, got integer"},
        DecodeErrorCase{"UnknownNested",
                        R"({"devices":[{"name":"d","containerEdits":{"mounts":[{"x":1}]}}]})",
                        "devices[0].containerEdits.mounts[0].x: unknown field"},
        DecodeErrorCase{
            "MajorNotInteger",
            R"({"devices":[{},{"containerEdits":{"deviceNodes":[{"major":"1"}]}}]})",
            "devices[1].containerEdits.deviceNodes[0].major: expected integer, got string"},
        DecodeErrorCase{"FloatForInteger", R"({"containerEdits":{"deviceNodes":[{"minor":1.5}]}})",
                        "containerEdits.deviceNodes[0].minor: expected integer, got number"},
        DecodeErrorCase{"UidOutOfRange", R"({"containerEdits":{"deviceNodes":[{"uid":-1}]}})",
                        "containerEdits.deviceNodes[0].uid: -1 is out of range [0, 4294967295]"},
        DecodeErrorCase{"GidTooLarge", R"({"containerEdits":{"additionalGids":[4294967296]}})",
                        "containerEdits.additionalGids[0]: 4294967296 is out of range"},
        DecodeErrorCase{"AnnotationValueNotString", R"({"annotations":{"a":1}})",
                        "annotations[\"a\"]: expected string, got integer"},
        DecodeErrorCase{"IntelRdtUnsupported", R"({"containerEdits":{"intelRdt":{}}})",
                        "containerEdits.intelRdt: not supported"},
        DecodeErrorCase{"EnvNotArray", R"({"containerEdits":{"env":"A=1"}})",
                        "containerEdits.env: expected array, got string"},
        DecodeErrorCase{"InvalidUtf8", "{\"kind\":\"\xff\"}", "malformed JSON at byte"}),
    [](const ::testing::TestParamInfo<DecodeErrorCase>& info) { return info.param.name; });

TEST(ContainerEdits, AppendKeepsOrder) {
  ContainerEdits a{.env = {"A=1"}, .additional_gids = {1}};
  ContainerEdits b{.env = {"B=2"}, .mounts = {{.host_path = "/h", .container_path = "/c"}}};
  a.Append(b);
  EXPECT_EQ(a.env, (std::vector<std::string>{"A=1", "B=2"}));
  EXPECT_EQ(a.mounts.size(), 1u);
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(ContainerEdits{}.empty());
}

}  // namespace
}  // namespace dra::cdi
