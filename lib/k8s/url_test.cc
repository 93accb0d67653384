#include "lib/k8s/url.h"

#include "gtest/gtest.h"
#include "lib/k8s/client.h"

namespace dra::k8s {
namespace {

TEST(QueryTest, EscapesSelectors) {
  EXPECT_EQ(QueryEscape("spec.driver=gpu.nvidia.com"), "spec.driver%3Dgpu.nvidia.com");
  EXPECT_EQ(QueryEscape("a in (x,y)"), "a%20in%20%28x%2Cy%29");
  std::string q;
  AddQueryParam(q, "limit", "10");
  AddQueryParam(q, "continue", "");
  AddQueryParam(q, "labelSelector", "k!=v");
  EXPECT_EQ(q, "?limit=10&labelSelector=k%21%3Dv");
}

TEST(ResourcePathTest, CoreGroupNamespacedAndSubresources) {
  constexpr ResourceInfo kPods{"", "v1", "Pod", "pods", true};
  constexpr ResourceInfo kSlices{"resource.k8s.io", "v1", "ResourceSlice", "resourceslices", false};
  constexpr ResourceInfo kClaims{"resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", true};
  EXPECT_EQ(ResourcePath(kPods, "ns", "p"), "/api/v1/namespaces/ns/pods/p");
  EXPECT_EQ(ResourcePath(kPods, "", ""), "/api/v1/pods");
  EXPECT_EQ(ResourcePath(kSlices, "ignored", "s"), "/apis/resource.k8s.io/v1/resourceslices/s");
  EXPECT_EQ(ResourcePath(kClaims, "ns", "c", "status"),
            "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status");
  EXPECT_EQ(ApiVersion(kPods), "v1");
  EXPECT_EQ(ApiVersion(kClaims), "resource.k8s.io/v1");
}

}  // namespace
}  // namespace dra::k8s
