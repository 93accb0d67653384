#include "lib/k8s/objects_apps.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using json = nlohmann::json;

constexpr const char* kDaemonSet = R"json({
  "apiVersion": "apps/v1",
  "kind": "DaemonSet",
  "metadata": {"name": "compute-domain-daemon-4f2a", "namespace": "nvidia-dra-driver-gpu",
               "uid": "c0ffee00-1111-4222-8333-444455556666", "resourceVersion": "9001",
               "generation": 2, "labels": {"resource.nvidia.com/computeDomain": "4f2a"}},
  "spec": {
    "selector": {"matchLabels": {"app": "cd-daemon"}},
    "template": {"metadata": {"labels": {"app": "cd-daemon"}},
                 "spec": {"containers": [{"name": "daemon", "image": "dra:latest"}]}},
    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
  },
  "status": {
    "currentNumberScheduled": 4,
    "numberMisscheduled": 0,
    "desiredNumberScheduled": 4,
    "numberReady": 3,
    "observedGeneration": 2,
    "updatedNumberScheduled": 4,
    "numberAvailable": 3,
    "numberUnavailable": 1
  }
})json";

TEST(DaemonSetTest, DecodesRolloutStatus) {
  absl::StatusOr<DaemonSet> ds = DaemonSet::FromJson(json::parse(kDaemonSet));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->metadata.generation, 2);
  EXPECT_EQ(ds->status.desired_number_scheduled, 4);
  EXPECT_EQ(ds->status.current_number_scheduled, 4);
  EXPECT_EQ(ds->status.number_ready, 3);
  EXPECT_EQ(ds->status.updated_number_scheduled, 4);
  EXPECT_EQ(ds->status.number_available, 3);
  EXPECT_EQ(ds->status.number_unavailable, 1);
  EXPECT_EQ(ds->status.observed_generation, 2);
  EXPECT_EQ(ds->spec["updateStrategy"]["type"], "RollingUpdate");
}

TEST(DaemonSetTest, RoundTripsExceptZeroCounters) {
  json in = json::parse(kDaemonSet);
  absl::StatusOr<DaemonSet> ds = DaemonSet::FromJson(in);
  ASSERT_TRUE(ds.ok());
  // numberMisscheduled is not typed, so its explicit 0 survives from unknown_fields.
  EXPECT_EQ(ds->ToJson(), in);

  in["status"]["numberReady"] = 0;  // typed zero: omitted, which decodes the same
  ds = DaemonSet::FromJson(in);
  ASSERT_TRUE(ds.ok());
  json out = ds->ToJson();
  EXPECT_FALSE(out["status"].contains("numberReady"));
  EXPECT_EQ(DaemonSet::FromJson(out)->status.number_ready, 0);
}

TEST(DaemonSetTest, BuiltInCodeHasNoStatus) {
  DaemonSet ds;
  ds.metadata.name = "d";
  ds.metadata.namespace_name = "ns";
  ds.spec = json::parse(R"({"selector": {"matchLabels": {"a": "b"}}})");
  EXPECT_EQ(ds.ToJson(), json::parse(R"({
    "apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {"name": "d", "namespace": "ns"},
    "spec": {"selector": {"matchLabels": {"a": "b"}}}
  })"));
}

TEST(DaemonSetTest, WrongTypeNamesPath) {
  json in = json::parse(kDaemonSet);
  in["status"]["numberReady"] = "3";
  absl::StatusOr<DaemonSet> ds = DaemonSet::FromJson(in);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(),
            "DaemonSet \"nvidia-dra-driver-gpu/compute-domain-daemon-4f2a\": "
            "status.numberReady: expected integer, got string");
}

}  // namespace
}  // namespace dra::k8s
