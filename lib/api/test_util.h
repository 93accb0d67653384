#pragma once

// Test helpers of lib/api (tests only).

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"

namespace dra::api::testing {

// A registry with every driver gate, then `spec` ("MPSSupport=true,...") applied.
inline std::unique_ptr<FeatureGates> Gates(absl::string_view spec = "") {
  auto gates = std::make_unique<FeatureGates>();
  EXPECT_TRUE(RegisterDriverFeatureGates(*gates).ok());
  absl::Status set = gates->Set(spec);
  EXPECT_TRUE(set.ok()) << set;
  return gates;
}

// Every driver gate and rule, with every gate available (settable) whether or not this version
// implements it: for tests of code paths that only a future version can reach (the rules among
// unimplemented gates, a refusal under DynamicMIG).
inline void RegisterDriverGatesAllAvailable(FeatureGates& gates) {
  for (const DriverGate& g : DriverGates()) {
    ASSERT_TRUE(gates.Register(g.name, {.stage = g.stage, .default_value = g.default_value}).ok());
  }
  ASSERT_TRUE(AddDriverGateRules(gates).ok());
}

// The two sharing gates on.
inline std::unique_ptr<FeatureGates> SharingGates() {
  return Gates("TimeSlicingSettings=true,MPSSupport=true");
}

// `{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "<kind>"<rest>}`: rest is "" or starts
// with a comma.
inline std::string Params(absl::string_view kind, absl::string_view rest = "") {
  return std::string("{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"") +
         std::string(kind) + "\"" + std::string(rest) + "}";
}

}  // namespace dra::api::testing
