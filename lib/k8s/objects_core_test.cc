#include "lib/k8s/objects_core.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Trimmed from `kubectl get node -o json` of a kind-like cluster.
constexpr const char* kNode = R"json({
  "apiVersion": "v1",
  "kind": "Node",
  "metadata": {
    "name": "gpu-node-1",
    "uid": "a3c9d1f2-0b1e-4c55-9d2a-6e0f1b2c3d4e",
    "resourceVersion": "1022",
    "creationTimestamp": "2026-03-01T09:00:00Z",
    "labels": {"kubernetes.io/hostname": "gpu-node-1", "nvidia.com/gpu.present": "true"},
    "annotations": {"node.alpha.kubernetes.io/ttl": "0"}
  },
  "spec": {
    "podCIDR": "10.244.1.0/24",
    "podCIDRs": ["10.244.1.0/24"],
    "providerID": "kind://docker/kind/gpu-node-1",
    "unschedulable": true,
    "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                "timeAdded": "2026-03-01T09:30:00Z"}]
  },
  "status": {
    "capacity": {"cpu": "16", "memory": "131811520Ki", "pods": "110"},
    "allocatable": {"cpu": "16", "memory": "131709120Ki", "pods": "110"},
    "conditions": [
      {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
       "message": "kubelet has sufficient memory available",
       "lastHeartbeatTime": "2026-03-01T10:00:00Z", "lastTransitionTime": "2026-03-01T09:00:00Z"},
      {"type": "Ready", "status": "True", "reason": "KubeletReady",
       "message": "kubelet is posting ready status",
       "lastHeartbeatTime": "2026-03-01T10:00:00Z", "lastTransitionTime": "2026-03-01T09:00:10Z"}
    ],
    "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}],
    "nodeInfo": {
      "machineID": "0f0e0d0c0b0a09080706050403020100",
      "bootID": "5d1b0a59-7c84-4b4e-a0c3-3a1d6a7b9e21",
      "kernelVersion": "6.8.0-45-generic",
      "kubeletVersion": "v1.36.0",
      "containerRuntimeVersion": "containerd://2.1.0",
      "architecture": "amd64",
      "operatingSystem": "linux"
    }
  }
})json";

TEST(NodeTest, DecodesTypedFields) {
  absl::StatusOr<Node> node = Node::FromJson(json::parse(kNode));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->metadata.name, "gpu-node-1");
  EXPECT_EQ(node->metadata.uid, "a3c9d1f2-0b1e-4c55-9d2a-6e0f1b2c3d4e");
  EXPECT_TRUE(node->spec.unschedulable);
  ASSERT_EQ(node->status.conditions.size(), 2u);
  EXPECT_EQ(node->status.conditions[1].type, "Ready");
  EXPECT_EQ(node->status.conditions[1].status, "True");
  EXPECT_EQ(node->status.conditions[1].reason, "KubeletReady");
  EXPECT_EQ(node->status.node_info.boot_id, "5d1b0a59-7c84-4b4e-a0c3-3a1d6a7b9e21");
  EXPECT_EQ(node->raw, json::parse(kNode));
}

TEST(NodeTest, RoundTripsUnchanged) {
  json in = json::parse(kNode);
  absl::StatusOr<Node> node = Node::FromJson(in);
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->ToJson(), in);
}

TEST(NodeTest, EditedTypedFieldsOverrideRaw) {
  absl::StatusOr<Node> node = Node::FromJson(json::parse(kNode));
  ASSERT_TRUE(node.ok());
  node->spec.unschedulable = false;
  node->status.conditions.pop_back();
  json out = node->ToJson();
  EXPECT_FALSE(out["spec"].contains("unschedulable"));
  EXPECT_EQ(out["spec"]["providerID"], "kind://docker/kind/gpu-node-1");
  EXPECT_EQ(out["status"]["conditions"].size(), 1u);
  EXPECT_EQ(out["status"]["conditions"][0]["lastHeartbeatTime"], "2026-03-01T10:00:00Z");
}

TEST(NodeTest, WrongTypeNamesNodeAndPath) {
  json in = json::parse(kNode);
  in["status"]["conditions"][1]["status"] = true;
  absl::StatusOr<Node> node = Node::FromJson(in);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().message(),
            "Node \"gpu-node-1\": status.conditions[1].status: expected string, got boolean");
}

constexpr const char* kPod = R"json({
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "trainer-0", "namespace": "team-a",
               "uid": "0a6c1a70-1b7c-4d9e-8f2a-5d7e4c3b2a10", "resourceVersion": "5120"},
  "spec": {
    "nodeName": "gpu-node-1",
    "restartPolicy": "Never",
    "resourceClaims": [
      {"name": "gpu", "resourceClaimTemplateName": "single-gpu"},
      {"name": "shared", "resourceClaimName": "shared-gpus"}
    ],
    "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["true"]}],
    "containers": [
      {"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
       "command": ["nvidia-smi", "-L"],
       "env": [{"name": "A", "value": "1"}],
       "resources": {"limits": {"cpu": "1"}, "claims": [{"name": "gpu"}, {"name": "shared", "request": "big"}]}},
      {"name": "sidecar", "image": "busybox:1.36"}
    ]
  },
  "status": {
    "phase": "Running",
    "podIP": "10.244.1.7",
    "resourceClaimStatuses": [
      {"name": "gpu", "resourceClaimName": "trainer-0-gpu-x7k2p"},
      {"name": "shared", "resourceClaimName": "shared-gpus"}
    ],
    "conditions": [{"type": "Ready", "status": "True"}]
  }
})json";

TEST(PodTest, DecodesClaimReferences) {
  absl::StatusOr<Pod> pod = Pod::FromJson(json::parse(kPod));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->spec.node_name, "gpu-node-1");
  ASSERT_EQ(pod->spec.resource_claims.size(), 2u);
  EXPECT_EQ(pod->spec.resource_claims[0].resource_claim_template_name, "single-gpu");
  EXPECT_FALSE(pod->spec.resource_claims[0].resource_claim_name.has_value());
  EXPECT_EQ(pod->spec.resource_claims[1].resource_claim_name, "shared-gpus");
  ASSERT_EQ(pod->spec.containers.size(), 2u);
  EXPECT_EQ(pod->spec.containers[0].image, "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04");
  ASSERT_EQ(pod->spec.containers[0].resources.claims.size(), 2u);
  EXPECT_EQ(pod->spec.containers[0].resources.claims[1].name, "shared");
  EXPECT_EQ(pod->spec.containers[0].resources.claims[1].request, "big");
  EXPECT_EQ(pod->spec.init_containers.size(), 1u);
  EXPECT_EQ(pod->status.phase, "Running");
  ASSERT_EQ(pod->status.resource_claim_statuses.size(), 2u);
  EXPECT_EQ(pod->status.resource_claim_statuses[0].resource_claim_name, "trainer-0-gpu-x7k2p");
}

TEST(PodTest, RoundTripsUnchanged) {
  json in = json::parse(kPod);
  absl::StatusOr<Pod> pod = Pod::FromJson(in);
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ(pod->ToJson(), in);
}

TEST(PodTest, WrongTypeInContainerClaims) {
  json in = json::parse(kPod);
  in["spec"]["containers"][0]["resources"]["claims"][1]["request"] = 7;
  absl::StatusOr<Pod> pod = Pod::FromJson(in);
  ASSERT_FALSE(pod.ok());
  EXPECT_EQ(pod.status().message(),
            "Pod \"team-a/trainer-0\": spec.containers[0].resources.claims[1].request: "
            "expected string, got integer");
}

TEST(PodTest, BuiltInCodeOmitsEmptyFields) {
  Pod pod;
  pod.metadata.name = "p";
  pod.metadata.namespace_name = "default";
  Container c;
  c.name = "main";
  c.image = "busybox";
  pod.spec.containers.push_back(c);
  EXPECT_EQ(pod.ToJson(), json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "main", "image": "busybox"}]}
  })"));
}

constexpr const char* kEvent = R"json({
  "apiVersion": "v1",
  "kind": "Event",
  "metadata": {"name": "trainer-0.17f3a2b4c5d6e7f8", "namespace": "team-a",
               "uid": "7d2e1f00-aaaa-4bbb-8ccc-0123456789ab", "resourceVersion": "5200",
               "creationTimestamp": "2026-03-01T10:01:00Z"},
  "involvedObject": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "name": "trainer-0-gpu-x7k2p", "namespace": "team-a",
                     "uid": "6f1b3c1e-5b8d-4a52-9a43-0c1f5d0e7a11", "resourceVersion": "48211"},
  "reason": "PrepareFailed",
  "message": "prepare devices for claim 6f1b3c1e: MIG mode is disabled on gpu-0",
  "type": "Warning",
  "source": {"component": "gpu-kubelet-plugin", "host": "gpu-node-1"},
  "reportingComponent": "gpu.nvidia.com/kubelet-plugin",
  "reportingInstance": "gpu-node-1",
  "firstTimestamp": "2026-03-01T10:01:00Z",
  "lastTimestamp": "2026-03-01T10:03:00Z",
  "count": 3,
  "eventTime": null
})json";

TEST(EventTest, DecodesAndRoundTrips) {
  json in = json::parse(kEvent);
  absl::StatusOr<Event> event = Event::FromJson(in);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_EQ(event->involved_object.kind, "ResourceClaim");
  EXPECT_EQ(event->involved_object.namespace_name, "team-a");
  EXPECT_EQ(event->involved_object.uid, "6f1b3c1e-5b8d-4a52-9a43-0c1f5d0e7a11");
  EXPECT_EQ(event->reason, "PrepareFailed");
  EXPECT_EQ(event->type, "Warning");
  EXPECT_EQ(event->source.component, "gpu-kubelet-plugin");
  EXPECT_EQ(event->source.host, "gpu-node-1");
  EXPECT_EQ(event->reporting_component, "gpu.nvidia.com/kubelet-plugin");
  EXPECT_EQ(event->reporting_instance, "gpu-node-1");
  EXPECT_EQ(event->first_timestamp, "2026-03-01T10:01:00Z");
  EXPECT_EQ(event->last_timestamp, "2026-03-01T10:03:00Z");
  EXPECT_EQ(event->count, 3);
  EXPECT_EQ(event->ToJson(), in);  // "eventTime": null is not typed: it round-trips via raw
}

TEST(EventTest, BuiltInCodeForCreate) {
  Event event;
  event.metadata.generate_name = "trainer-0.";
  event.metadata.namespace_name = "team-a";
  event.involved_object = {.api_version = "v1",
                           .kind = "Pod",
                           .name = "trainer-0",
                           .namespace_name = "team-a",
                           .uid = "u1"};
  event.reason = "Prepared";
  event.message = "prepared 1 device";
  event.type = "Normal";
  event.source.component = "gpu-kubelet-plugin";
  event.first_timestamp = "2026-03-01T10:01:00Z";
  event.last_timestamp = "2026-03-01T10:01:00Z";
  event.count = 1;
  EXPECT_EQ(event.ToJson(), json::parse(R"({
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"generateName": "trainer-0.", "namespace": "team-a"},
    "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "trainer-0",
                       "namespace": "team-a", "uid": "u1"},
    "reason": "Prepared", "message": "prepared 1 device", "type": "Normal",
    "source": {"component": "gpu-kubelet-plugin"},
    "firstTimestamp": "2026-03-01T10:01:00Z", "lastTimestamp": "2026-03-01T10:01:00Z",
    "count": 1
  })"));
}

TEST(EventTest, CountMustBeAnInt32) {
  json in = json::parse(kEvent);
  in["count"] = 5000000000;
  absl::StatusOr<Event> event = Event::FromJson(in);
  ASSERT_FALSE(event.ok());
  EXPECT_THAT(std::string(event.status().message()),
              HasSubstr("Event \"team-a/trainer-0.17f3a2b4c5d6e7f8\": count: integer out of "
                        "range, 5000000000 does not fit a 32-bit signed integer"));
}

}  // namespace
}  // namespace dra::k8s
