#include "lib/k8s/object_meta.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/objects_core.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr const char* kFullMetadata = R"json({
  "name": "gpu-claim-x7k2p",
  "generateName": "gpu-claim-",
  "namespace": "team-a",
  "uid": "6f1b3c1e-5b8d-4a52-9a43-0c1f5d0e7a11",
  "resourceVersion": "48211",
  "generation": 3,
  "creationTimestamp": "2026-03-01T10:00:00Z",
  "deletionTimestamp": "2026-03-01T11:00:00Z",
  "deletionGracePeriodSeconds": 0,
  "labels": {"app": "trainer", "tier": "gpu"},
  "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
  "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "trainer-0",
                       "uid": "0a6c1a70-1b7c-4d9e-8f2a-5d7e4c3b2a10", "controller": true,
                       "blockOwnerDeletion": true}],
  "finalizers": ["resource.kubernetes.io/delete-protection"],
  "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                     "apiVersion": "resource.k8s.io/v1", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {}}}]
})json";

TEST(ObjectMetaTest, DecodesAllTypedFields) {
  absl::StatusOr<ObjectMeta> meta = ObjectMeta::FromJson(json::parse(kFullMetadata));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->name, "gpu-claim-x7k2p");
  EXPECT_EQ(meta->generate_name, "gpu-claim-");
  EXPECT_EQ(meta->namespace_name, "team-a");
  EXPECT_EQ(meta->uid, "6f1b3c1e-5b8d-4a52-9a43-0c1f5d0e7a11");
  EXPECT_EQ(meta->resource_version, "48211");
  EXPECT_EQ(meta->generation, 3);
  EXPECT_EQ(meta->creation_timestamp, "2026-03-01T10:00:00Z");
  EXPECT_EQ(meta->deletion_timestamp, "2026-03-01T11:00:00Z");
  EXPECT_EQ(meta->labels.at("tier"), "gpu");
  EXPECT_EQ(meta->annotations.at("resource.kubernetes.io/pod-claim-name"), "gpu");
  ASSERT_EQ(meta->owner_references.size(), 1u);
  EXPECT_EQ(meta->owner_references[0].kind, "Pod");
  EXPECT_EQ(meta->owner_references[0].controller, true);
  EXPECT_EQ(meta->owner_references[0].block_owner_deletion, true);
  EXPECT_EQ(meta->finalizers,
            (std::vector<std::string>{"resource.kubernetes.io/delete-protection"}));
  EXPECT_TRUE(meta->unknown_fields.contains("managedFields"));
  EXPECT_TRUE(meta->unknown_fields.contains("deletionGracePeriodSeconds"));
}

TEST(ObjectMetaTest, RoundTripsIncludingUnknownFields) {
  json in = json::parse(kFullMetadata);
  absl::StatusOr<ObjectMeta> meta = ObjectMeta::FromJson(in);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->ToJson(), in);
}

TEST(ObjectMetaTest, OmitsEmptyFields) {
  EXPECT_EQ(ObjectMeta().ToJson(), json::object());

  ObjectMeta meta;
  meta.generate_name = "00000-gpu.nvidia.com-node1-";
  meta.owner_references.push_back(
      {.api_version = "v1", .kind = "Node", .name = "node1", .uid = "u1", .controller = true});
  EXPECT_EQ(meta.ToJson(), json::parse(R"({
    "generateName": "00000-gpu.nvidia.com-node1-",
    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node1", "uid": "u1",
                         "controller": true}]
  })"));
}

TEST(ObjectMetaTest, ClearedTypedFieldsDoNotSurviveFromUnknownOrRaw) {
  absl::StatusOr<ObjectMeta> meta = ObjectMeta::FromJson(json::parse(kFullMetadata));
  ASSERT_TRUE(meta.ok());
  meta->labels.clear();
  meta->finalizers.clear();
  meta->deletion_timestamp.reset();
  json out = meta->ToJson();
  EXPECT_FALSE(out.contains("labels"));
  EXPECT_FALSE(out.contains("finalizers"));
  EXPECT_FALSE(out.contains("deletionTimestamp"));
  EXPECT_TRUE(out.contains("managedFields"));
}

TEST(ObjectMetaTest, NullTimestampFromClientSideObjectsIsAccepted) {
  absl::StatusOr<ObjectMeta> meta =
      ObjectMeta::FromJson(json::parse(R"({"name": "x", "creationTimestamp": null})"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->creation_timestamp, "");
  EXPECT_EQ(meta->ToJson(), json::parse(R"({"name": "x"})"));
}

TEST(ObjectMetaTest, WrongTypeNamesThePath) {
  absl::StatusOr<ObjectMeta> meta = ObjectMeta::FromJson(json::parse(R"({"labels": {"app": 1}})"));
  ASSERT_FALSE(meta.ok());
  EXPECT_EQ(meta.status().message(), "metadata.labels[\"app\"]: expected string, got integer");

  meta = ObjectMeta::FromJson(
      json::parse(R"({"ownerReferences": [{"kind": "Node", "controller": "yes"}]})"));
  ASSERT_FALSE(meta.ok());
  EXPECT_EQ(meta.status().message(),
            "metadata.ownerReferences[0].controller: expected boolean, got string");
}

TEST(ListMetaTest, Decodes) {
  absl::StatusOr<ListMeta> meta = ListMeta::FromJson(json::parse(
      R"({"resourceVersion": "991", "continue": "eyJ2IjoibWV0YS", "remainingItemCount": 12})"));
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->resource_version, "991");
  EXPECT_EQ(meta->continue_token, "eyJ2IjoibWV0YS");
  EXPECT_EQ(meta->remaining_item_count, 12);

  meta = ListMeta::FromJson(json::parse(R"({"resourceVersion": "5"})"));
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->continue_token, "");
  EXPECT_FALSE(meta->remaining_item_count.has_value());

  meta = ListMeta::FromJson(json::parse(R"({"continue": 3})"));
  ASSERT_FALSE(meta.ok());
  EXPECT_EQ(meta.status().message(), "metadata.continue: expected string, got integer");
}

TEST(TopLevelTest, ChecksKindAndApiVersionWhenPresent) {
  // List items come without apiVersion/kind: accepted.
  EXPECT_TRUE(Node::FromJson(json::parse(R"({"metadata": {"name": "n"}})")).ok());

  absl::StatusOr<Node> node =
      Node::FromJson(json::parse(R"({"kind": "Pod", "metadata": {"name": "n"}})"));
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().message(), "Node \"n\": kind: expected Node, got Pod");

  absl::StatusOr<Pod> pod = Pod::FromJson(json::parse(
      R"({"apiVersion": "apps/v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})"));
  ASSERT_FALSE(pod.ok());
  EXPECT_EQ(pod.status().message(), "Pod \"ns/p\": apiVersion: expected v1, got apps/v1");
}

TEST(TopLevelTest, RejectsNonObjects) {
  absl::StatusOr<Node> node = Node::FromJson(json::array());
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(node.status().message(), "Node: expected object, got array");

  node = Node::FromJson(json::parse(R"({"metadata": "n"})"));
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(std::string(node.status().message()),
              HasSubstr("metadata: expected object, got string"));
}

TEST(TopLevelTest, ApiVersionOfCoreAndGroupedKinds) {
  EXPECT_EQ(ApiVersion(Node::kResource), "v1");
  EXPECT_EQ(
      ApiVersion(ResourceInfo{"resource.k8s.io", "v1", "ResourceSlice", "resourceslices", false}),
      "resource.k8s.io/v1");
}

}  // namespace
}  // namespace dra::k8s
