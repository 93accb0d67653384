#include "lib/kubeletplugin/slice_publisher.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/k8s/client.h"
#include "test/support/canned_http_server.h"

namespace dra::kubeletplugin {
namespace {

TEST(SliceIndexTest, WidthIsAtLeastFiveHexDigits) {
  EXPECT_EQ(SliceIndexWidth(0), 5);
  EXPECT_EQ(SliceIndexWidth(1), 5);
  EXPECT_EQ(SliceIndexWidth(0x100000), 5);  // last index 0xfffff
  EXPECT_EQ(SliceIndexWidth(0x100001), 6);  // last index 0x100000
}

TEST(SliceIndexTest, ParsesOnlyExactWidthLowerHexFollowedByDash) {
  EXPECT_EQ(ParseSliceIndex("00000-gpu.nvidia.com-node1-abcde", 5), 0u);
  EXPECT_EQ(ParseSliceIndex("0001f-gpu.nvidia.com-node1-x", 5), 31u);
  EXPECT_EQ(ParseSliceIndex("000001-gpu", 6), 1u);
  EXPECT_FALSE(ParseSliceIndex("0001-gpu", 5).has_value());    // too short
  EXPECT_FALSE(ParseSliceIndex("000001-gpu", 5).has_value());  // no dash at width
  EXPECT_FALSE(ParseSliceIndex("0000A-gpu", 5).has_value());   // upper-case hex
  EXPECT_FALSE(ParseSliceIndex("gpu-slice-1", 5).has_value());
  EXPECT_FALSE(ParseSliceIndex("00000", 5).has_value());
}

// Malformed answers from the API server are errors of this publisher, never a crash. Both tests
// ended the binary with an uncaught nlohmann::json::type_error before lib/common/json_access.h.

std::unique_ptr<k8s::Client> ClientFor(const dra::testing::CannedHttpServer& server) {
  k8s::RestConfig cfg;
  cfg.server = server.url();
  auto c = k8s::Client::Create(cfg, {.max_retries = 0});
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TEST(SlicePublisherBadServerDataTest, OwnerNodeWithMalformedMetadataIsAnError) {
  dra::testing::CannedHttpServer server({{200, R"({"kind":"Node","metadata":5})", ""}});
  auto client = ClientFor(server);
  auto p = SlicePublisher::Create(client.get(), {.driver = "gpu.example.com", .node_name = "n1"});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "slice publisher: owner Node n1: metadata: expected object, got integer");
}

TEST(SlicePublisherBadServerDataTest, MalformedSliceListFailsTheSyncWithTheFieldPath) {
  dra::testing::CannedHttpServer server({{200, R"({"metadata":5,"items":[]})", ""}});
  auto client = ClientFor(server);
  auto p = SlicePublisher::Create(client.get(), {.driver = "gpu.example.com",
                                                 .node_name = "n1",
                                                 .node_uid = "uid-1",
                                                 .max_retry_delay = absl::Milliseconds(50)});
  ASSERT_TRUE(p.ok()) << p.status();
  (*p)->Update({.pools = {{"n1", Pool{}}}});
  absl::Status s = (*p)->WaitForSync(absl::Seconds(2));
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("list resourceslices.resource.k8s.io: response: metadata: "
                                   "expected object, got integer"));
  (*p)->Stop();
}

}  // namespace
}  // namespace dra::kubeletplugin
