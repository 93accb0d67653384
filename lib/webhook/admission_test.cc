#include "lib/webhook/admission.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "nlohmann/json.hpp"

namespace dra::webhook {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::unique_ptr<FeatureGates> Gates(absl::string_view spec = "") {
  auto gates = std::make_unique<FeatureGates>();
  EXPECT_TRUE(api::RegisterDriverFeatureGates(*gates).ok());
  absl::Status s = gates->SetWithoutConstraintChecks(spec);
  EXPECT_TRUE(s.ok()) << s;
  return gates;
}

json Opaque(absl::string_view driver, json parameters) {
  return {{"opaque", {{"driver", std::string(driver)}, {"parameters", std::move(parameters)}}}};
}

json GpuConfig(json sharing = nullptr) {
  json p = {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "GpuConfig"}};
  if (!sharing.is_null()) p["sharing"] = std::move(sharing);
  return p;
}

// A claim (or template) with the given devices.config entries.
json Object(bool is_template, json configs) {
  json devices = {
      {"requests",
       json::array({{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}})},
      {"config", std::move(configs)}};
  if (is_template) {
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaimTemplate"},
            {"metadata", {{"name", "t"}, {"namespace", "ns"}}},
            {"spec", {{"spec", {{"devices", devices}}}}}};
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", "c"}, {"namespace", "ns"}}},
          {"spec", {{"devices", devices}}}};
}

json Review(json object, absl::string_view resource = "resourceclaims",
            absl::string_view version = "v1", absl::string_view operation = "CREATE",
            absl::string_view group = "resource.k8s.io") {
  json request = {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                  {"kind", {{"group", group}, {"version", version}, {"kind", "ResourceClaim"}}},
                  {"resource", {{"group", group}, {"version", version}, {"resource", resource}}},
                  {"operation", operation},
                  {"namespace", "ns"}};
  if (!object.is_null()) request["object"] = std::move(object);
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", std::move(request)}};
}

// Parses a 200 response and returns its "response" member, checking the envelope.
json Response(const AdmissionResult& r) {
  EXPECT_EQ(r.http_code, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  json j = json::parse(r.body);
  EXPECT_EQ(j["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(j["kind"], "AdmissionReview");
  EXPECT_EQ(j["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  return j["response"];
}

json With(json base, const json& extra) {
  base.update(extra);
  return base;
}

AdmissionResult Handle(const json& review, const FeatureGates& gates) {
  return HandleAdmissionReview("application/json", review.dump(), gates);
}

TEST(AdmissionTest, ContentTypeMustBeExactlyApplicationJson) {
  auto gates = Gates();
  std::string body = Review(Object(false, json::array())).dump();
  for (absl::string_view ct : {"", "text/plain", "application/json; charset=utf-8",
                               "application/yaml", "Application/JSON"}) {
    AdmissionResult r = HandleAdmissionReview(ct, body, *gates);
    EXPECT_EQ(r.http_code, 415) << ct;
    EXPECT_EQ(r.outcome, ReviewOutcome::kBadRequest);
    EXPECT_EQ(r.message, absl::StrCat("contentType=", ct, ", expected application/json"));
  }
}

TEST(AdmissionTest, MalformedBodiesAre400) {
  auto gates = Gates();
  json no_request = Review(nullptr);
  no_request.erase("request");
  json null_request = Review(nullptr);
  null_request["request"] = nullptr;
  json v1beta1 = Review(Object(false, json::array()));
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  json wrong_kind = Review(Object(false, json::array()));
  wrong_kind["kind"] = "ConversionReview";
  json string_request = Review(nullptr);
  string_request["request"] = "x";
  struct Case {
    std::string name;
    std::string body;
    std::string message;
  } cases[] = {
      {"not json", "{", "could not decode the request body as an AdmissionReview: invalid JSON"},
      {"empty", "", "could not decode the request body as an AdmissionReview: invalid JSON"},
      {"array", "[]", "expected an admission.k8s.io/v1 AdmissionReview object, got array"},
      {"no request", no_request.dump(), "AdmissionReview has no request"},
      {"null request", null_request.dump(), "AdmissionReview has no request"},
      {"string request", string_request.dump(), "request: expected an object, got string"},
      {"v1beta1 review", v1beta1.dump(),
       "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got apiVersion "
       "\"admission.k8s.io/v1beta1\" and kind \"AdmissionReview\""},
      {"wrong kind", wrong_kind.dump(),
       "got apiVersion \"admission.k8s.io/v1\" and kind "
       "\"ConversionReview\""},
  };
  for (const Case& c : cases) {
    AdmissionResult r = HandleAdmissionReview("application/json", c.body, *gates);
    EXPECT_EQ(r.http_code, 400) << c.name;
    EXPECT_EQ(r.outcome, ReviewOutcome::kBadRequest) << c.name;
    EXPECT_THAT(r.message, HasSubstr(c.message)) << c.name;
    EXPECT_EQ(r.body, r.message + "\n") << c.name;
  }
}

TEST(AdmissionTest, ValidConfigsAreAllowedForEveryVersionOfClaimsAndTemplates) {
  auto gates = Gates();
  for (bool is_template : {false, true}) {
    for (absl::string_view version : {"v1", "v1beta1", "v1beta2"}) {
      json review =
          Review(Object(is_template, json::array({Opaque("gpu.nvidia.com", GpuConfig())})),
                 is_template ? "resourceclaimtemplates" : "resourceclaims", version);
      AdmissionResult r = Handle(review, *gates);
      json resp = Response(r);
      EXPECT_EQ(resp["allowed"], true) << version << " template=" << is_template << r.body;
      EXPECT_FALSE(resp.contains("status"));
      EXPECT_EQ(r.outcome, ReviewOutcome::kAllowed);
    }
  }
}

TEST(AdmissionTest, InvalidConfigNamesTheFullPathForClaimsAndTemplates) {
  auto gates = Gates();
  json bad = Opaque("gpu.nvidia.com", GpuConfig({{"strategy", "Fabric"}}));
  for (absl::string_view version : {"v1", "v1beta1", "v1beta2"}) {
    AdmissionResult claim =
        Handle(Review(Object(false, json::array({bad})), "resourceclaims", version), *gates);
    json resp = Response(claim);
    EXPECT_EQ(resp["allowed"], false);
    EXPECT_EQ(resp["status"]["reason"], "Invalid");
    EXPECT_EQ(resp["status"]["message"],
              "1 configs failed to validate: spec.devices.config[0].opaque.parameters.sharing."
              "strategy: unknown GPU sharing strategy: Fabric, supported GPU sharing strategies: "
              "TimeSlicing, MPS");
    EXPECT_EQ(claim.outcome, ReviewOutcome::kDenied);

    AdmissionResult tmpl =
        Handle(Review(Object(true, json::array({bad})), "resourceclaimtemplates", version), *gates);
    EXPECT_EQ(Response(tmpl)["status"]["message"],
              "1 configs failed to validate: spec.spec.devices.config[0].opaque.parameters."
              "sharing.strategy: unknown GPU sharing strategy: Fabric, supported GPU sharing "
              "strategies: TimeSlicing, MPS");
  }
}

TEST(AdmissionTest, ConfigErrorsTable) {
  auto gates = Gates();
  struct Case {
    std::string name;
    json parameters;
    std::string message;  // after "1 configs failed to validate: "
  } cases[] = {
      {"unknown field", With(GpuConfig(), {{"shring", json::object()}}),
       "spec.devices.config[0].opaque.parameters.shring: unknown field, allowed fields: "
       "apiVersion, kind, sharing"},
      {"odd key", With(GpuConfig(), {{"a.b", 1}}),
       "spec.devices.config[0].opaque.parameters[\"a.b\"]: unknown field, allowed fields: "
       "apiVersion, kind, sharing"},
      {"not an object", json::array(),
       "spec.devices.config[0].opaque.parameters: expected a JSON object, got array"},
      {"missing kind", json{{"apiVersion", "resource.nvidia.com/v1beta1"}},
       "spec.devices.config[0].opaque.parameters.kind: required field is missing"},
      {"wrong apiVersion", json{{"apiVersion", "v1"}, {"kind", "GpuConfig"}},
       "spec.devices.config[0].opaque.parameters.apiVersion: unsupported value \"v1\""},
      {"time slicing gate off", GpuConfig({{"strategy", "TimeSlicing"}}),
       "spec.devices.config[0].opaque.parameters.sharing.strategy: \"TimeSlicing\" is selected "
       "as the GPU sharing strategy, but the \"TimeSlicingSettings\" feature gate is not "
       "enabled"},
      {"mps gate off", GpuConfig({{"strategy", "MPS"}}),
       "spec.devices.config[0].opaque.parameters.sharing.strategy: \"MPS\" is selected as the "
       "GPU sharing strategy, but the \"MPSSupport\" feature gate is not enabled"},
      {"wrong type", GpuConfig({{"strategy", 3}}),
       "spec.devices.config[0].opaque.parameters.sharing.strategy: expected string, got integer"},
      {"missing parameters", nullptr,
       "spec.devices.config[0].opaque.parameters: required for driver gpu.nvidia.com"},
  };
  for (const Case& c : cases) {
    json entry = Opaque("gpu.nvidia.com", c.parameters);
    if (c.parameters.is_null()) entry["opaque"].erase("parameters");
    json resp = Response(Handle(Review(Object(false, json::array({entry}))), *gates));
    EXPECT_EQ(resp["allowed"], false) << c.name;
    EXPECT_EQ(resp["status"]["reason"], "Invalid") << c.name;
    EXPECT_THAT(resp["status"]["message"].get<std::string>(),
                HasSubstr("1 configs failed to validate: " + c.message))
        << c.name;
  }
}

TEST(AdmissionTest, AllConfigErrorsAreCollectedAndOtherDriversIgnored) {
  auto gates = Gates();
  json configs = json::array({
      Opaque("gpu.nvidia.com", GpuConfig({{"strategy", "Fabric"}})),
      // Not ours: garbage is fine.
      Opaque("compute-domain.nvidia.com", json{{"whatever", true}}),
      Opaque("gpu.nvidia.com", GpuConfig()),
      Opaque(
          "gpu.nvidia.com",
          json{{"apiVersion", "resource.nvidia.com/v1beta1"},
               {"kind", "MigDeviceConfig"},
               {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", json::object()}}}}),
      json{{"requests", json::array({"gpu"})}},  // no opaque member
  });
  json resp = Response(Handle(Review(Object(false, configs)), *gates));
  EXPECT_EQ(resp["allowed"], false);
  EXPECT_EQ(resp["status"]["message"],
            "2 configs failed to validate: spec.devices.config[0].opaque.parameters.sharing."
            "strategy: unknown GPU sharing strategy: Fabric, supported GPU sharing strategies: "
            "TimeSlicing, MPS; spec.devices.config[3].opaque.parameters.sharing.strategy: "
            "\"TimeSlicing\" is selected as the GPU sharing strategy, but the "
            "\"TimeSlicingSettings\" feature gate is not enabled");

  json others = json::array({Opaque("example.com/driver", json{{"x", 1}}),
                             Opaque("gpu.nvidia.com.evil", json{{"x", 1}})});
  EXPECT_EQ(Response(Handle(Review(Object(false, others)), *gates))["allowed"], true);
}

TEST(AdmissionTest, GatesDecideTimeSlicingAndMps) {
  json ts = Opaque("gpu.nvidia.com", GpuConfig({{"strategy", "TimeSlicing"},
                                                {"timeSlicingConfig", {{"interval", "Long"}}}}));
  json mps = Opaque(
      "gpu.nvidia.com",
      GpuConfig({{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 50}}}}));
  // A MigDeviceConfig's interval (set on the parent GPU at prepare) needs the same gate.
  json mig_ts =
      Opaque("gpu.nvidia.com",
             json{{"apiVersion", "resource.nvidia.com/v1beta1"},
                  {"kind", "MigDeviceConfig"},
                  {"sharing",
                   {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", "Long"}}}}}});
  struct Case {
    std::string gates;
    bool ts_allowed;
    bool mps_allowed;
  } cases[] = {
      {"", false, false},
      {"TimeSlicingSettings=true", true, false},
      {"MPSSupport=true", false, true},
      {"TimeSlicingSettings=true,MPSSupport=true", true, true},
  };
  for (const Case& c : cases) {
    auto gates = Gates(c.gates);
    EXPECT_EQ(Response(Handle(Review(Object(false, json::array({ts}))), *gates))["allowed"],
              c.ts_allowed)
        << c.gates;
    EXPECT_EQ(Response(Handle(Review(Object(false, json::array({mig_ts}))), *gates))["allowed"],
              c.ts_allowed)
        << c.gates;
    EXPECT_EQ(Response(Handle(Review(Object(true, json::array({mps})), "resourceclaimtemplates"),
                              *gates))["allowed"],
              c.mps_allowed)
        << c.gates;
  }
  auto gates = Gates("MPSSupport=true");
  json too_much = Opaque(
      "gpu.nvidia.com",
      GpuConfig({{"strategy", "MPS"}, {"mpsConfig", {{"defaultActiveThreadPercentage", 101}}}}));
  EXPECT_THAT(
      Response(Handle(Review(Object(false, json::array({too_much}))), *gates))["status"]["message"]
          .get<std::string>(),
      HasSubstr("spec.devices.config[0].opaque.parameters.sharing.mpsConfig."
                "defaultActiveThreadPercentage: active thread percentage must not be "
                "greater than 100"));
  json mig_mps_with_interval = Opaque(
      "gpu.nvidia.com",
      json{{"apiVersion", "resource.nvidia.com/v1beta1"},
           {"kind", "MigDeviceConfig"},
           {"sharing", {{"strategy", "MPS"}, {"timeSlicingConfig", {{"interval", "Long"}}}}}});
  EXPECT_THAT(Response(Handle(Review(Object(false, json::array({mig_mps_with_interval}))),
                              *gates))["status"]["message"]
                  .get<std::string>(),
              HasSubstr("spec.devices.config[0].opaque.parameters.sharing.timeSlicingConfig: "
                        "cannot use TimeSlicingConfig with the 'MPS' strategy"));
}

// Only the kinds the GPU plugin applies are admitted (VfioDeviceConfig too, since VFIO passthrough
// exists): the compute-domain kinds would fail every prepare.
TEST(AdmissionTest, OnlyKindsTheGpuPluginAppliesAreAccepted) {
  auto gates = Gates();
  auto params = [](absl::string_view kind, const json& extra) {
    json p = {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", std::string(kind)}};
    p.update(extra);
    return Opaque("gpu.nvidia.com", p);
  };
  json good =
      json::array({params("GpuConfig", json::object()), params("MigDeviceConfig", json::object()),
                   params("VfioDeviceConfig", json::object()),
                   params("VfioDeviceConfig", {{"iommu", {{"backendPolicy", "PreferIommuFD"}}}})});
  AdmissionResult r = Handle(Review(Object(false, good)), *gates);
  EXPECT_EQ(Response(r)["allowed"], true) << r.body;

  json refused = json::array({
      params("ComputeDomainChannelConfig", {{"domainID", "d"}}),
      params("ComputeDomainDaemonConfig", {{"domainID", "d"}}),
  });
  json resp = Response(Handle(Review(Object(true, refused), "resourceclaimtemplates"), *gates));
  EXPECT_EQ(resp["allowed"], false);
  EXPECT_EQ(resp["status"]["reason"], "Invalid");
  EXPECT_EQ(resp["status"]["message"].get<std::string>(),
            "2 configs failed to validate: "
            "spec.spec.devices.config[0].opaque.parameters.kind: ComputeDomainChannelConfig does "
            "not configure devices of driver gpu.nvidia.com (allowed kinds for driver "
            "gpu.nvidia.com: GpuConfig, MigDeviceConfig, VfioDeviceConfig); "
            "spec.spec.devices.config[1].opaque.parameters.kind: ComputeDomainDaemonConfig does "
            "not configure devices of driver gpu.nvidia.com (allowed kinds for driver "
            "gpu.nvidia.com: GpuConfig, MigDeviceConfig, VfioDeviceConfig)");

  // Decode errors still come first, with the path to the bad field.
  json bad_vfio = json::array({params("VfioDeviceConfig", {{"iommu", {{"backendPolicy", "X"}}}})});
  EXPECT_THAT(Response(Handle(Review(Object(false, bad_vfio)), *gates))["status"]["message"]
                  .get<std::string>(),
              HasSubstr("spec.devices.config[0].opaque.parameters.iommu.backendPolicy: unknown "
                        "IOMMU backend policy: X"));
}

TEST(AdmissionTest, UnsupportedResourcesAreDeniedWithBadRequest) {
  auto gates = Gates();
  struct Case {
    std::string group, version, resource, printed;
  } cases[] = {
      {"resource.k8s.io", "v1alpha3", "resourceclaims",
       "resource.k8s.io/v1alpha3, Resource=resourceclaims"},
      {"resource.k8s.io", "v1", "deviceclasses", "resource.k8s.io/v1, Resource=deviceclasses"},
      {"", "v1", "pods", "/v1, Resource=pods"},
      {"resource.example.com", "v1", "resourceclaims",
       "resource.example.com/v1, Resource=resourceclaims"},
  };
  for (const Case& c : cases) {
    json review = Review(Object(false, json::array()), c.resource, c.version, "CREATE", c.group);
    AdmissionResult r = Handle(review, *gates);
    json resp = Response(r);
    EXPECT_EQ(resp["allowed"], false) << c.printed;
    EXPECT_EQ(resp["status"]["reason"], "BadRequest");
    EXPECT_EQ(resp["status"]["message"],
              "expected resource to be one of the supported versions for resourceclaims or "
              "resourceclaimtemplates, got " +
                  c.printed);
    EXPECT_EQ(r.outcome, ReviewOutcome::kDenied);
  }
}

TEST(AdmissionTest, DeleteAndObjectlessRequestsAreAllowed) {
  auto gates = Gates();
  json bad = Object(false, json::array({Opaque("gpu.nvidia.com", GpuConfig({{"strategy", "X"}}))}));
  EXPECT_EQ(Response(Handle(Review(bad, "resourceclaims", "v1", "DELETE"), *gates))["allowed"],
            true);
  EXPECT_EQ(Response(Handle(Review(nullptr), *gates))["allowed"], true);
  // Even for a resource we do not handle.
  EXPECT_EQ(Response(Handle(Review(nullptr, "pods", "v1", "DELETE", ""), *gates))["allowed"], true);
}

TEST(AdmissionTest, UpdateIsValidatedLikeCreate) {
  auto gates = Gates();
  json bad = Object(false, json::array({Opaque("gpu.nvidia.com", GpuConfig({{"strategy", "X"}}))}));
  EXPECT_EQ(Response(Handle(Review(bad, "resourceclaims", "v1", "UPDATE"), *gates))["allowed"],
            false);
}

TEST(AdmissionTest, ObjectsWithoutConfigsAreAllowedAndMalformedOnesAreBadRequest) {
  auto gates = Gates();
  json no_config = Object(false, json::array());
  no_config["spec"]["devices"].erase("config");
  EXPECT_EQ(Response(Handle(Review(no_config), *gates))["allowed"], true);
  json no_spec = {{"metadata", {{"name", "x"}}}};
  EXPECT_EQ(Response(Handle(Review(no_spec), *gates))["allowed"], true);

  json config_object = Object(false, json::object());
  json resp = Response(Handle(Review(config_object), *gates));
  EXPECT_EQ(resp["allowed"], false);
  EXPECT_EQ(resp["status"]["reason"], "BadRequest");
  EXPECT_EQ(resp["status"]["message"],
            "could not decode the resourceclaims object: spec.devices.config: expected an array, "
            "got object");
  json spec_string = {{"spec", "x"}};
  resp = Response(Handle(Review(spec_string, "resourceclaimtemplates"), *gates));
  EXPECT_EQ(resp["status"]["message"],
            "could not decode the resourceclaimtemplates object: spec: expected an object, got "
            "string");
}

TEST(AdmissionTest, DuplicateKeyInParametersIsThatConfigsError) {
  auto gates = Gates();
  std::string params =
      R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","kind":"GpuConfig"})";
  std::string body =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("operation":"CREATE","resource":{"group":"resource.k8s.io","version":"v1",)"
      R"("resource":"resourceclaims"},"object":{"spec":{"devices":{"config":[)"
      R"({"opaque":{"driver":"gpu.nvidia.com","parameters":{"kind":"GpuConfig"}}},)"
      R"({"opaque":{"driver":"gpu.nvidia.com","parameters":)" +
      params + "}}]}}}}}";
  AdmissionResult r = HandleAdmissionReview("application/json", body, *gates);
  ASSERT_EQ(r.http_code, 200) << r.body;
  json resp = json::parse(r.body)["response"];
  EXPECT_EQ(resp["allowed"], false);
  EXPECT_EQ(resp["status"]["message"],
            "2 configs failed to validate: spec.devices.config[0].opaque.parameters.apiVersion: "
            "required field is missing, expected resource.nvidia.com/v1beta1; "
            "spec.devices.config[1].opaque.parameters.kind: duplicate field");

  // The parameters key itself twice: the config's error too.
  std::string twice =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("operation":"CREATE","resource":{"group":"resource.k8s.io","version":"v1",)"
      R"("resource":"resourceclaims"},"object":{"spec":{"devices":{"config":[{"opaque":)"
      R"({"driver":"gpu.nvidia.com","parameters":{},"parameters":)" +
      params.substr(0, params.rfind(",\"kind\"")) + "}}}]}}}}}";
  r = HandleAdmissionReview("application/json", twice, *gates);
  ASSERT_EQ(r.http_code, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["response"]["status"]["message"],
            "1 configs failed to validate: spec.devices.config[0].opaque.parameters: duplicate "
            "field");

  // A duplicate elsewhere is tolerated (last wins), as by the Go decoder.
  std::string elsewhere =
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
      R"("uid":"v","operation":"CREATE","resource":{"group":"resource.k8s.io","version":"v1",)"
      R"("resource":"resourceclaims"},"object":{}}})";
  r = HandleAdmissionReview("application/json", elsewhere, *gates);
  ASSERT_EQ(r.http_code, 200) << r.body;
  resp = json::parse(r.body)["response"];
  EXPECT_EQ(resp["allowed"], true);
  EXPECT_EQ(resp["uid"], "v");
}

TEST(AdmissionTest, ResponseEscapesUidAndMessage) {
  auto gates = Gates();
  json review = Review(Object(
      false, json::array({Opaque("gpu.nvidia.com", GpuConfig({{"strategy", "a\"b\\c\n\x01"}}))})));
  review["request"]["uid"] = "u\"1";
  AdmissionResult r = Handle(review, *gates);
  json j = json::parse(r.body);  // throws if the escaping were wrong
  EXPECT_EQ(j["response"]["uid"], "u\"1");
  EXPECT_THAT(j["response"]["status"]["message"].get<std::string>(),
              HasSubstr("unknown GPU sharing strategy: a\"b\\c\n\x01"));
}

TEST(AdmissionTest, OutcomeNames) {
  EXPECT_EQ(ReviewOutcomeName(ReviewOutcome::kAllowed), "allowed");
  EXPECT_EQ(ReviewOutcomeName(ReviewOutcome::kDenied), "denied");
  EXPECT_EQ(ReviewOutcomeName(ReviewOutcome::kBadRequest), "bad_request");
}

}  // namespace
}  // namespace dra::webhook
