#include "lib/cddaemon/pod_readiness.h"

#include "gtest/gtest.h"

namespace dra::cddaemon {
namespace {

nlohmann::json PodWith(const char* phase, nlohmann::json conditions) {
  return {{"status", {{"phase", phase}, {"conditions", std::move(conditions)}}}};
}

TEST(PodIsReadyTest, Table) {
  nlohmann::json ready = {{"type", "Ready"}, {"status", "True"}};
  nlohmann::json not_ready = {{"type", "Ready"}, {"status", "False"}};
  nlohmann::json scheduled = {{"type", "PodScheduled"}, {"status", "True"}};
  EXPECT_TRUE(PodIsReady(PodWith("Running", {scheduled, ready})));
  EXPECT_FALSE(PodIsReady(PodWith("Running", {scheduled, not_ready})));
  EXPECT_FALSE(PodIsReady(PodWith("Running", {scheduled})));
  EXPECT_FALSE(PodIsReady(PodWith("Pending", {ready})));
  EXPECT_FALSE(PodIsReady(PodWith("Succeeded", {ready})));
  EXPECT_FALSE(PodIsReady(nlohmann::json::object()));
  EXPECT_FALSE(PodIsReady({{"status", {{"phase", "Running"}}}}));
  EXPECT_FALSE(PodIsReady({{"status", "garbage"}}));
  EXPECT_FALSE(PodIsReady(nullptr));
}

}  // namespace
}  // namespace dra::cddaemon
