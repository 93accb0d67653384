#include "lib/cdi/validate.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdi/names.h"
#include "lib/cdi/version.h"

namespace dra::cdi {
namespace {

using ::testing::HasSubstr;

Spec Minimal() {
  Spec spec;
  spec.version = "0.3.0";
  spec.kind = "example.com/claim";
  spec.devices.push_back({.name = "gpu0", .container_edits = {.env = {"A=1"}}});
  return spec;
}

TEST(ValidateSpec, AcceptsMinimalSpec) { EXPECT_TRUE(ValidateSpec(Minimal()).ok()); }

struct InvalidCase {
  std::string name;
  void (*mutate)(Spec&);
  std::string error;
};

class ValidateSpecErrors : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(ValidateSpecErrors, NamesTheFieldPath) {
  Spec spec = Minimal();
  GetParam().mutate(spec);
  absl::Status status = ValidateSpec(spec);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ValidateSpecErrors,
    ::testing::Values(
        InvalidCase{"NoVersion", [](Spec& s) { s.version = ""; }, "cdiVersion: required"},
        InvalidCase{"UnknownVersion", [](Spec& s) { s.version = "9.9.9"; },
                    "cdiVersion: unknown version \"9.9.9\""},
        InvalidCase{"VersionTooOld", [](Spec& s) { s.devices[0].name = "0gpu"; },
                    "cdiVersion: \"0.3.0\" is too old for this spec: devices[0].name (starts with "
                    "a digit) needs 0.5.0"},
        InvalidCase{"KindWithoutClass", [](Spec& s) { s.kind = "example.com"; },
                    "kind: invalid kind \"example.com\": expected <vendor>/<class>"},
        InvalidCase{"OneCharVendor", [](Spec& s) { s.kind = "a/claim"; },
                    "invalid vendor \"a\": must be at least 2 characters"},
        InvalidCase{"ClassEndsWithDash", [](Spec& s) { s.kind = "example.com/claim-"; },
                    "invalid class \"claim-\": must end with a letter or digit"},
        InvalidCase{"VendorStartsWithDigit", [](Spec& s) { s.kind = "1example.com/claim"; },
                    "must start with a letter"},
        InvalidCase{"NoDevices", [](Spec& s) { s.devices.clear(); },
                    "devices: at least one device is required"},
        InvalidCase{"BadDeviceName", [](Spec& s) { s.devices[0].name = "gpu/0"; },
                    "devices[0].name: invalid device name \"gpu/0\""},
        InvalidCase{"DuplicateDevice", [](Spec& s) { s.devices.push_back(s.devices[0]); },
                    "devices[1].name: duplicate device name \"gpu0\""},
        InvalidCase{"EmptyDeviceEdits", [](Spec& s) { s.devices[0].container_edits = {}; },
                    "devices[0].containerEdits: a device needs at least one edit"},
        InvalidCase{"EnvWithoutEquals", [](Spec& s) { s.container_edits.env = {"A"}; },
                    "containerEdits.env[0]: must be KEY=VALUE"},
        InvalidCase{"EnvLeadingEquals", [](Spec& s) { s.devices[0].container_edits.env = {"=1"}; },
                    "devices[0].containerEdits.env[0]: must be KEY=VALUE"},
        InvalidCase{"RelativeDevicePath",
                    [](Spec& s) { s.container_edits.device_nodes = {{.path = "dev/x"}}; },
                    "containerEdits.deviceNodes[0].path: must be an absolute path, got \"dev/x\""},
        InvalidCase{"RelativeHostPath",
                    [](Spec& s) {
                      s.version = "0.5.0";
                      s.container_edits.device_nodes = {{.path = "/dev/x", .host_path = "x"}};
                    },
                    "containerEdits.deviceNodes[0].hostPath: must be an absolute path"},
        InvalidCase{"BadDeviceType",
                    [](Spec& s) { s.container_edits.device_nodes = {{.path = "/x", .type = "z"}}; },
                    "containerEdits.deviceNodes[0].type: must be one of"},
        InvalidCase{
            "BadPermissions",
            [](Spec& s) { s.container_edits.device_nodes = {{.path = "/x", .permissions = "rx"}}; },
            "containerEdits.deviceNodes[0].permissions: must be a subset of \"rwm\""},
        InvalidCase{"MountWithoutContainerPath",
                    [](Spec& s) { s.devices[0].container_edits.mounts = {{.host_path = "/a"}}; },
                    "devices[0].containerEdits.mounts[0].containerPath: required"},
        InvalidCase{"MountRelativeHostPath",
                    [](Spec& s) {
                      s.container_edits.mounts = {
                          {.host_path = "lib/x.so", .container_path = "/x"}};
                    },
                    "containerEdits.mounts[0].hostPath: must be an absolute path, got "
                    "\"lib/x.so\""},
        InvalidCase{"BadHookName",
                    [](Spec& s) { s.container_edits.hooks = {{.hook_name = "pre", .path = "/h"}}; },
                    "containerEdits.hooks[0].hookName: must be one of"},
        InvalidCase{"HookWithoutPath",
                    [](Spec& s) { s.container_edits.hooks = {{.hook_name = "poststop"}}; },
                    "containerEdits.hooks[0].path: required"},
        InvalidCase{"HookZeroTimeout",
                    [](Spec& s) {
                      s.container_edits.hooks = {
                          {.hook_name = "poststop", .path = "/h", .timeout = 0}};
                    },
                    "containerEdits.hooks[0].timeout: must be positive"},
        InvalidCase{
            "NulInPath",
            [](Spec& s) { s.container_edits.device_nodes = {{.path = std::string("/a\0b", 4)}}; },
            "containerEdits.deviceNodes[0].path: contains a NUL byte"},
        InvalidCase{"InvalidUtf8",
                    [](Spec& s) {
                      s.container_edits.mounts = {{.host_path = "/a\xc3", .container_path = "/b"}};
                    },
                    "containerEdits.mounts[0].hostPath: is not valid UTF-8"},
        InvalidCase{"OverlongUtf8", [](Spec& s) { s.container_edits.env = {"A=\xc0\xaf"}; },
                    "containerEdits.env[0]: is not valid UTF-8"},
        InvalidCase{"BadAnnotationKey",
                    [](Spec& s) {
                      s.version = "0.6.0";
                      s.annotations = {{"-bad", "x"}};
                    },
                    "annotations[\"-bad\"]: key name must be"},
        InvalidCase{"BadAnnotationPrefix",
                    [](Spec& s) {
                      s.version = "0.6.0";
                      s.devices[0].annotations = {{"a_b.com/x", "x"}};
                    },
                    "devices[0].annotations[\"a_b.com/x\"]: key prefix must be a DNS subdomain"},
        InvalidCase{"AnnotationsTooLarge",
                    [](Spec& s) {
                      s.version = "0.6.0";
                      s.annotations = {{"a", std::string(size_t{256} * 1024, 'x')}};
                    },
                    "annotations: total size 262145 bytes exceeds 262144"}),
    [](const ::testing::TestParamInfo<InvalidCase>& info) { return info.param.name; });

TEST(ValidateSpec, AcceptsValidUtf8AndQualifiedAnnotationKeys) {
  Spec spec = Minimal();
  spec.version = "0.6.0";
  spec.annotations = {{"example.com/Owner.name_1", "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80"}};
  EXPECT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec);
}

struct VersionCase {
  std::string name;
  void (*mutate)(Spec&);
  std::string version;
  std::string reason;
};

class MinimumVersionTest : public ::testing::TestWithParam<VersionCase> {};

TEST_P(MinimumVersionTest, IsTheLowestThatSupportsTheContent) {
  Spec spec = Minimal();
  GetParam().mutate(spec);
  RequiredVersion required = MinimumVersion(spec);
  EXPECT_EQ(required.version, GetParam().version);
  EXPECT_EQ(required.reason, GetParam().reason);
  spec.version = required.version;
  EXPECT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MinimumVersionTest,
    ::testing::Values(VersionCase{"Plain", [](Spec&) {}, "0.3.0", ""},
                      VersionCase{"MountType",
                                  [](Spec& s) {
                                    s.devices[0].container_edits.mounts = {{.host_path = "/a",
                                                                            .container_path = "/a",
                                                                            .type = "bind"}};
                                  },
                                  "0.4.0", "devices[0].containerEdits.mounts[0].type"},
                      VersionCase{"HostPath",
                                  [](Spec& s) {
                                    s.container_edits.device_nodes = {
                                        {.path = "/dev/x", .host_path = "/h/x"}};
                                  },
                                  "0.5.0", "containerEdits.deviceNodes[0].hostPath"},
                      VersionCase{"LeadingDigit", [](Spec& s) { s.devices[0].name = "7f3a-gpu-0"; },
                                  "0.5.0", "devices[0].name (starts with a digit)"},
                      VersionCase{"SpecAnnotations",
                                  [](Spec& s) {
                                    s.annotations = {{"a", "b"}};
                                  },
                                  "0.6.0", "annotations"},
                      VersionCase{"DeviceAnnotations",
                                  [](Spec& s) {
                                    s.devices[0].annotations = {{"a", "b"}};
                                  },
                                  "0.6.0", "devices[0].annotations"},
                      VersionCase{"DotInClass", [](Spec& s) { s.kind = "example.com/gpu.claim"; },
                                  "0.6.0", "kind (a '.' in the class)"},
                      VersionCase{"AdditionalGids",
                                  [](Spec& s) {
                                    s.devices[0].name = "0gpu";  // 0.5.0, then raised by the gids
                                    s.container_edits.additional_gids = {44};
                                  },
                                  "0.7.0", "containerEdits.additionalGids"}),
    [](const ::testing::TestParamInfo<VersionCase>& info) { return info.param.name; });

TEST(Versions, KnownAndOrdered) {
  EXPECT_TRUE(IsKnownVersion("0.5.0"));
  EXPECT_TRUE(IsKnownVersion(kCurrentVersion));
  EXPECT_FALSE(IsKnownVersion("0.9.0"));
  EXPECT_FALSE(IsKnownVersion("1.1"));
  EXPECT_LT(CompareVersions("0.10.0", "1.0.0"), 0);
  EXPECT_GT(CompareVersions("0.10.0", "0.9.0"), 0);
  EXPECT_EQ(CompareVersions("1.1.0", "1.1.0"), 0);
}

TEST(Names, Kinds) {
  absl::StatusOr<Kind> kind = ParseKind("k8s.gpu.example.com/claim");
  ASSERT_TRUE(kind.ok()) << kind.status();
  EXPECT_EQ(kind->vendor, "k8s.gpu.example.com");
  EXPECT_EQ(kind->class_name, "claim");
  EXPECT_EQ(kind->ToString(), "k8s.gpu.example.com/claim");
}

TEST(Names, DeviceNameRules) {
  for (const char* good : {"a", "0", "gpu-0", "a:b.c_d-e", "MIG-1g.10gb-0"}) {
    EXPECT_TRUE(ValidateDeviceName(good).ok()) << good;
  }
  for (const char* bad : {"", "-a", "a-", "a/b", "a b", "a=b"}) {
    EXPECT_FALSE(ValidateDeviceName(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace dra::cdi
