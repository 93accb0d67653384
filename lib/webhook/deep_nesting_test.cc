// Deeply nested AdmissionReviews (issue 24): a body nested past the most the API server relays is
// answered 400 naming the limit, one at the limit is decided as usual, and neither needs a stack
// that grows with the nesting (a recursive copy of a 60,000-level request.object overflowed the
// loop thread's stack and killed the process).

#include <pthread.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/webhook/admission.h"
#include "nlohmann/json.hpp"

namespace dra::webhook {
namespace {

using ::testing::HasSubstr;

// The message of the 400 for a body nested too deep.
constexpr absl::string_view kTooDeep =
    "could not decode the request body as an AdmissionReview: JSON nested deeper than 10002 "
    "levels (request.object may nest 10000, the most the API server decodes)";

// `levels` nested objects, {"a":{"a":{}}} for 3.
std::string NestedObjects(int levels) {
  std::string s;
  s.reserve(static_cast<size_t>(levels) * 6);
  for (int i = 1; i < levels; ++i) s += R"({"a":)";
  s += "{}";
  s.append(static_cast<size_t>(levels - 1), '}');
  return s;
}

// `levels` nested arrays, [[[]]] for 3.
std::string NestedArrays(int levels) {
  return std::string(static_cast<size_t>(levels), '[') +
         std::string(static_cast<size_t>(levels), ']');
}

std::string ReviewText(absl::string_view object) {
  return absl::StrCat(
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
      R"("operation":"CREATE","resource":{"group":"resource.k8s.io","version":"v1",)"
      R"("resource":"resourceclaims"},"object":)",
      object, "}}");
}

// A ResourceClaim whose one gpu.nvidia.com config has `parameters`.
std::string ClaimWithParameters(absl::string_view parameters) {
  return absl::StrCat(
      R"({"metadata":{"name":"c","namespace":"ns"},"spec":{"devices":{"config":[{"opaque":)"
      R"({"driver":"gpu.nvidia.com","parameters":)",
      parameters, "}}]}}}");
}

// The deepest nesting of `text`, which has no brackets inside strings.
int Depth(absl::string_view text) {
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    if (c == '}' || c == ']') --depth;
  }
  return deepest;
}

struct Shape {
  std::string name;
  // The review whose request.object nests `depth` levels (request.object itself is level 1).
  std::function<std::string(int depth)> review;
};

std::vector<Shape> Shapes() {
  constexpr absl::string_view kClaim = R"({"spec":{"devices":{"config":[]}},"deep":)";
  // request.object, spec, devices, config, config[0], opaque, parameters: 7 levels above the
  // value of a member of the parameters.
  constexpr absl::string_view kParams =
      R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":)";
  return {
      {"objects in request.object",
       [=](int depth) { return ReviewText(absl::StrCat(kClaim, NestedObjects(depth - 1), "}")); }},
      {"arrays in request.object",
       [=](int depth) { return ReviewText(absl::StrCat(kClaim, NestedArrays(depth - 1), "}")); }},
      {"objects in a config's opaque parameters",
       [=](int depth) {
         return ReviewText(
             ClaimWithParameters(absl::StrCat(kParams, NestedObjects(depth - 7), "}")));
       }},
      {"arrays in a config's opaque parameters",
       [=](int depth) {
         return ReviewText(
             ClaimWithParameters(absl::StrCat(kParams, NestedArrays(depth - 7), "}")));
       }},
      {"arrays as a config entry",
       [](int depth) {
         // request.object, spec, devices, config: the entry is level 5.
         return ReviewText(
             absl::StrCat(R"({"spec":{"devices":{"config":[)", NestedArrays(depth - 4), "]}}}"));
       }},
  };
}

std::unique_ptr<FeatureGates> Gates() {
  auto gates = std::make_unique<FeatureGates>();
  EXPECT_TRUE(api::RegisterDriverFeatureGates(*gates).ok());
  return gates;
}

// Runs `fn` on a thread with a stack of `bytes`: a step that recursed once per level of nesting
// would overflow it (a 10,000-level nlohmann copy needs several MiB).
void RunOnStack(size_t bytes, std::function<void()> fn) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* arg) -> void* {
                  (*static_cast<std::function<void()>*>(arg))();
                  return nullptr;
                },
                &fn),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// Less than any step that recursed per level would need at the limit, enough for the scan's
// bounded recursion (256 levels) under ASan.
constexpr size_t kSmallStack = 1 << 20;

TEST(DeepNestingTest, SixtyThousandLevelsAre400NamingTheLimit) {
  auto gates = Gates();
  for (const Shape& shape : Shapes()) {
    std::string body = shape.review(60000);
    RunOnStack(kSmallStack, [&] {
      for (auto* handle : {&HandleAdmissionReview, &HandleAdmissionReviewWhole}) {
        AdmissionResult r = handle("application/json", body, *gates);
        EXPECT_EQ(r.http_code, 400) << shape.name;
        EXPECT_EQ(r.outcome, ReviewOutcome::kBadRequest) << shape.name;
        EXPECT_EQ(r.message, kTooDeep) << shape.name;
        EXPECT_EQ(r.body, absl::StrCat(kTooDeep, "\n")) << shape.name;
      }
    });
  }
}

TEST(DeepNestingTest, TheLimitIsDecidedAndOneMoreIs400) {
  auto gates = Gates();
  for (const Shape& shape : Shapes()) {
    std::string at_limit = shape.review(kMaxObjectDepth);
    std::string over = shape.review(kMaxObjectDepth + 1);
    // The shapes nest as intended: request.object is two levels below the review's root.
    ASSERT_EQ(Depth(at_limit), kMaxReviewDepth) << shape.name;
    ASSERT_EQ(Depth(over), kMaxReviewDepth + 1) << shape.name;
    RunOnStack(kSmallStack, [&] {
      for (auto* handle : {&HandleAdmissionReview, &HandleAdmissionReviewWhole}) {
        AdmissionResult r = handle("application/json", at_limit, *gates);
        EXPECT_EQ(r.http_code, 200) << shape.name << ": " << r.body.substr(0, 300);
        EXPECT_NE(r.outcome, ReviewOutcome::kBadRequest) << shape.name;
        r = handle("application/json", over, *gates);
        EXPECT_EQ(r.http_code, 400) << shape.name;
        EXPECT_EQ(r.message, kTooDeep) << shape.name;
      }
    });
  }
}

TEST(DeepNestingTest, DeepConfigsAreDecidedLikeShallowOnes) {
  auto gates = Gates();
  std::vector<Shape> shapes = Shapes();
  // Parameters with a deep unknown member: that member is the config's error.
  AdmissionResult r =
      HandleAdmissionReview("application/json", shapes[3].review(kMaxObjectDepth), *gates);
  ASSERT_EQ(r.http_code, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.outcome, ReviewOutcome::kDenied);
  EXPECT_EQ(r.message,
            "1 configs failed to validate: spec.devices.config[0].opaque.parameters.sharing: "
            "expected object, got array");
  // Another driver's or no driver's deep content is not looked at.
  r = HandleAdmissionReview("application/json", shapes[4].review(kMaxObjectDepth), *gates);
  ASSERT_EQ(r.http_code, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.outcome, ReviewOutcome::kAllowed);
}

TEST(DeepNestingTest, InvalidJsonAtTheLimitIs400InvalidJson) {
  auto gates = Gates();
  // Deep and cut short: the parse fails deep down, and the strict parse that explains it runs.
  std::string body = Shapes()[0].review(kMaxObjectDepth);
  body.resize(body.size() - kMaxObjectDepth / 2);
  RunOnStack(kSmallStack, [&] {
    AdmissionResult r = HandleAdmissionReview("application/json", body, *gates);
    EXPECT_EQ(r.http_code, 400);
    EXPECT_THAT(r.message, HasSubstr("could not decode the request body as an AdmissionReview: "
                                     "invalid JSON"));
  });
  // Too deep and invalid: the depth is what is reported (checked before any parse).
  body = Shapes()[1].review(60000);
  body.resize(body.size() - 100);
  AdmissionResult r = HandleAdmissionReview("application/json", body, *gates);
  EXPECT_EQ(r.message, kTooDeep);
}

}  // namespace
}  // namespace dra::webhook
