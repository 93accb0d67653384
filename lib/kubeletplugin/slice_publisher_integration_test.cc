// The slice publisher against the real API server: naming, ownership, generation rules,
// republishing after an external wipe, and pool removal.

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/errors.h"
#include "lib/k8s/objects_core.h"
#include "lib/kubeletplugin/slice_publisher.h"
#include "test/support/cluster_env.h"

namespace dra::kubeletplugin {
namespace {

using k8s::ResourceSlice;

k8s::Device Gpu(int index, const std::string& product = "Mock H100") {
  k8s::Device d;
  d.name = absl::StrCat("gpu-", index);
  d.attributes["index"].int_value = index;
  d.attributes["productName"].string_value = product;
  d.capacity["memory"].value = k8s::Quantity::FromBytes(int64_t{80} << 30);
  return d;
}

class SlicePublisherIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto c = k8s::Client::Create(*cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    node_ = absl::StrCat("pub-node-", ::getpid(), "-", absl::ToUnixMillis(absl::Now()) % 100000);
    driver_ = "publisher.test.example.com";
    auto node =
        client_->Create(k8s::Node::kResource, "",
                        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node_}}}});
    ASSERT_TRUE(node.ok()) << node.status();
    node_uid_ = (*node)["metadata"]["uid"];
  }
  void TearDown() override {
    publisher_.reset();
    if (!client_) return;
    for (const auto& s : Slices())
      (void)client_->Delete(ResourceSlice::kResource, "", s.metadata.name);
    (void)client_->Delete(k8s::Node::kResource, "", node_);
  }
  void StartPublisher() {
    auto p = SlicePublisher::Create(client_.get(), {.driver = driver_, .node_name = node_});
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = std::move(*p);
  }
  std::vector<ResourceSlice> Slices() {
    std::vector<ResourceSlice> out;
    auto list = client_->ListAll(
        ResourceSlice::kResource, "",
        {.field_selector = absl::StrCat("spec.driver=", driver_, ",spec.nodeName=", node_)});
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return out;
    for (const auto& item : (*list)["items"]) {
      auto s = ResourceSlice::FromJson(item);
      EXPECT_TRUE(s.ok()) << s.status();
      if (s.ok()) out.push_back(*s);
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.metadata.name < b.metadata.name; });
    return out;
  }
  std::unique_ptr<k8s::Client> client_;
  std::unique_ptr<SlicePublisher> publisher_;
  std::string node_, node_uid_, driver_;
};

TEST_F(SlicePublisherIntegrationTest, PublishesNamedOwnedSlicesAndFollowsGenerationRules) {
  StartPublisher();
  DriverResources r;
  r.pools[node_].slices = {{.devices = {Gpu(0), Gpu(1)}}, {.devices = {Gpu(2)}}};
  publisher_->Update(r);
  ASSERT_TRUE(publisher_->WaitForSync(absl::Seconds(20)).ok());

  auto slices = Slices();
  ASSERT_EQ(slices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ResourceSlice& s = slices[i];
    EXPECT_TRUE(
        absl::StartsWith(s.metadata.name, absl::StrCat("0000", i, "-", driver_, "-", node_, "-")))
        << s.metadata.name;
    EXPECT_EQ(s.spec.pool.name, node_);
    EXPECT_EQ(s.spec.pool.generation, 1);
    EXPECT_EQ(s.spec.pool.resource_slice_count, 2);
    EXPECT_EQ(s.spec.node_name.value_or(""), node_);
    ASSERT_EQ(s.metadata.owner_references.size(), 1u);
    EXPECT_EQ(s.metadata.owner_references[0].kind, "Node");
    EXPECT_EQ(s.metadata.owner_references[0].uid, node_uid_);
    EXPECT_EQ(s.metadata.owner_references[0].controller.value_or(false), true);
  }
  EXPECT_EQ(slices[0].spec.devices.size(), 2u);
  EXPECT_EQ(slices[1].spec.devices[0].name, "gpu-2");

  // An unchanged desired state writes nothing.
  int writes = publisher_->writes();
  publisher_->Update(r);
  ASSERT_TRUE(publisher_->WaitForSync(absl::Seconds(20)).ok());
  EXPECT_EQ(publisher_->writes(), writes);

  // One slice changes: updated in place, generation kept.
  r.pools[node_].slices[1].devices[0] = Gpu(2, "Mock H200");
  publisher_->Update(r);
  ASSERT_TRUE(publisher_->WaitForSync(absl::Seconds(20)).ok());
  slices = Slices();
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].spec.pool.generation, 1);
  EXPECT_EQ(slices[1].spec.pool.generation, 1);
  EXPECT_EQ(slices[1].spec.devices[0].attributes["productName"].string_value, "Mock H200");
  EXPECT_EQ(publisher_->writes(), writes + 1);

  // A slice is added: generation bumps and every slice carries it.
  r.pools[node_].slices.push_back({.devices = {Gpu(3)}});
  publisher_->Update(r);
  ASSERT_TRUE(publisher_->WaitForSync(absl::Seconds(20)).ok());
  slices = Slices();
  ASSERT_EQ(slices.size(), 3u);
  for (const auto& s : slices) {
    EXPECT_EQ(s.spec.pool.generation, 2) << s.metadata.name;
    EXPECT_EQ(s.spec.pool.resource_slice_count, 3) << s.metadata.name;
  }
}

TEST_F(SlicePublisherIntegrationTest, RepublishesAfterAnExternalWipeAndRemovesStrays) {
  // A stray slice of our pool whose name has no index prefix is obsolete and deleted.
  ResourceSlice stray;
  stray.metadata.name = absl::StrCat("stray-", node_);
  stray.spec.driver = driver_;
  stray.spec.node_name = node_;
  stray.spec.pool = {.name = node_, .generation = 1, .resource_slice_count = 1};
  ASSERT_TRUE(client_->Create(ResourceSlice::kResource, "", stray.ToJson()).ok());

  StartPublisher();
  DriverResources r;
  r.pools[node_].slices = {{.devices = {Gpu(0)}}};
  publisher_->Update(r);
  ASSERT_TRUE(publisher_->WaitForSync(absl::Seconds(20)).ok());
  auto slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_NE(slices[0].metadata.name, stray.metadata.name);

  // The kubelet wipes a node's slices when the driver looks gone; the publisher restores them.
  ASSERT_TRUE(client_->Delete(ResourceSlice::kResource, "", slices[0].metadata.name).ok());
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (Slices().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u) << "slice not republished after deletion";
  EXPECT_EQ(slices[0].spec.devices[0].name, "gpu-0");

  // A pool that is no longer desired loses its slices.
  publisher_->Update(DriverResources{});
  ASSERT_TRUE(publisher_->WaitForSync(absl::Seconds(20)).ok());
  EXPECT_TRUE(Slices().empty());
}

}  // namespace
}  // namespace dra::kubeletplugin
