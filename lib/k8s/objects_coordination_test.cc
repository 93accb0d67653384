#include "lib/k8s/objects_coordination.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using json = nlohmann::json;

constexpr const char* kLease = R"json({
  "apiVersion": "coordination.k8s.io/v1",
  "kind": "Lease",
  "metadata": {"name": "compute-domain-controller", "namespace": "nvidia-dra-driver-gpu",
               "uid": "11111111-2222-4333-8444-555555555555", "resourceVersion": "777"},
  "spec": {
    "holderIdentity": "compute-domain-controller-7c9f_1b2c3d",
    "leaseDurationSeconds": 15,
    "acquireTime": "2026-03-01T10:00:00.000000Z",
    "renewTime": "2026-03-01T10:05:02.123456Z",
    "leaseTransitions": 2,
    "strategy": "OldestEmulationVersion"
  }
})json";

TEST(LeaseTest, DecodesAndRoundTrips) {
  json in = json::parse(kLease);
  absl::StatusOr<Lease> lease = Lease::FromJson(in);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->spec.holder_identity, "compute-domain-controller-7c9f_1b2c3d");
  EXPECT_EQ(lease->spec.lease_duration_seconds, 15);
  EXPECT_EQ(lease->spec.acquire_time, "2026-03-01T10:00:00.000000Z");
  EXPECT_EQ(lease->spec.renew_time, "2026-03-01T10:05:02.123456Z");
  EXPECT_EQ(lease->spec.lease_transitions, 2);
  EXPECT_EQ(lease->ToJson(), in);
}

TEST(LeaseTest, TakeoverEditKeepsUnknownFieldsAndMetadata) {
  absl::StatusOr<Lease> lease = Lease::FromJson(json::parse(kLease));
  ASSERT_TRUE(lease.ok());
  lease->spec.holder_identity = "other";
  lease->spec.lease_transitions = 3;
  json out = lease->ToJson();
  EXPECT_EQ(out["spec"]["holderIdentity"], "other");
  EXPECT_EQ(out["spec"]["leaseTransitions"], 3);
  EXPECT_EQ(out["spec"]["strategy"], "OldestEmulationVersion");
  EXPECT_EQ(out["metadata"]["resourceVersion"], "777");
}

TEST(LeaseTest, BuiltInCodeKeepsExplicitZeroes) {
  Lease lease;
  lease.metadata.name = "l";
  lease.metadata.namespace_name = "ns";
  lease.spec.holder_identity = "me";
  lease.spec.lease_transitions = 0;  // set: written even though zero
  EXPECT_EQ(lease.ToJson(), json::parse(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "l", "namespace": "ns"},
    "spec": {"holderIdentity": "me", "leaseTransitions": 0}
  })"));
}

TEST(LeaseTest, WrongTypeNamesPath) {
  json in = json::parse(kLease);
  in["spec"]["leaseDurationSeconds"] = "15s";
  absl::StatusOr<Lease> lease = Lease::FromJson(in);
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().message(),
            "Lease \"nvidia-dra-driver-gpu/compute-domain-controller\": "
            "spec.leaseDurationSeconds: expected integer, got string");
}

}  // namespace
}  // namespace dra::k8s
