// Controller::Start against a fake API server (no cluster): the informers' first lists must sync
// whatever objects the API server holds.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdcontroller/app.h"
#include "lib/cdcontroller/controller.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"
#include "lib/k8s/client.h"
#include "lib/k8s/wire_decode.h"
#include "lib/metrics/metrics.h"
#include "test/support/canned_http_server.h"

namespace dra::cdcontroller {
namespace {

using dra::testing::CannedHttpServer;

std::string Nested(int levels) {
  std::string out;
  for (int i = 0; i < levels; ++i) out += R"({"a":)";
  return out + "1" + std::string(levels, '}');
}

// A workload ResourceClaimTemplate with the controller's labels for domain `domain_uid`, whose
// opaque parameters are `parameters`.
std::string ClaimTemplate(const std::string& name, const std::string& domain_uid,
                          const std::string& parameters) {
  return absl::StrCat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":")",
      name, R"(","namespace":"ns","uid":"uid-)", name, R"(","resourceVersion":"3","labels":{")",
      k8s::kComputeDomainLabel, R"(":")", domain_uid, R"(",")", k8s::kComputeDomainTargetLabel,
      R"(":")", k8s::kComputeDomainTargetWorkload,
      R"("}},"spec":{"spec":{"devices":{"config":[{"opaque":{"driver":"compute-domain.nvidia.com",)",
      R"("parameters":)", parameters, "}}]}}}}");
}

std::string Page(const std::vector<std::string>& items) {
  std::string out = R"({"metadata":{"resourceVersion":"10"},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) absl::StrAppend(&out, i ? "," : "", items[i]);
  return out + "]}";
}

// Before: one template the client cannot read (nested deeper than 512 levels, which the API
// server accepts) failed every list of the templates, so Start never synced.
TEST(ControllerStartTest, SyncsAndWorksWithAnUnreadableClaimTemplateAmongNormalOnes) {
  const std::string normal = ClaimTemplate("normal", "gone-domain", "{}");
  const std::string deep = ClaimTemplate("deep", "other-gone-domain", Nested(10000));
  CannedHttpServer server([&](const std::string& line) -> CannedHttpServer::Reply {
    if (line.find("watch=true") != std::string::npos) return {200, "", ""};
    if (line.rfind("GET ", 0) == 0 && line.find("/resourceclaimtemplates") != std::string::npos) {
      // The garbage collector's list of one domain's templates (by label) holds only that one.
      if (line.find("gone-domain") != std::string::npos &&
          line.find("other-gone-domain") == std::string::npos) {
        return {200, Page({normal}), ""};
      }
      return {200, Page({normal, deep}), ""};
    }
    if (line.rfind("GET ", 0) == 0) return {200, Page({}), ""};
    return {404, R"({"kind":"Status","code":404,"reason":"NotFound"})", ""};
  });
  k8s::RestConfig rest;
  rest.server = server.url();
  auto client = k8s::Client::Create(rest);
  ASSERT_TRUE(client.ok()) << client.status();
  auto controller = Controller::Create(client->get(), ControllerConfig{}, nullptr);
  ASSERT_TRUE(controller.ok()) << controller.status();
  log::LogCapture logs(/*verbosity=*/0);
  absl::Status started = (*controller)->Start(absl::Seconds(20));
  ASSERT_TRUE(started.ok()) << started;
  std::vector<std::string> lines = logs.Lines();
  // The public controller's start line, at level 0 (docs/compatibility.md "Log lines").
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines[0], ::testing::HasSubstr(
                            "] \"Starting ComputeDomain Controller\" namespace=\"default\"\n"));
  // The others are served: the normal template of a domain that no longer exists is collected.
  auto deleted = [&] {
    for (const auto& request : server.requests()) {
      const std::string& line = request.first;
      if (line.find("DELETE ") == 0 &&
          line.find("/resourceclaimtemplates/normal") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  for (int i = 0; i < 2000 && !deleted(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(deleted());
  logs.Clear();
  (*controller)->Stop();
  (*controller)->Stop();  // once only
  lines = logs.Lines();
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) {
                            return l.find("] \"ComputeDomain Controller is shutdown\"\n") !=
                                   std::string::npos;
                          }),
            1);
  EXPECT_GE(k8s::UndecodableCount("resourceclaimtemplates.resource.k8s.io"), 1);
}

// The generated metrics reference (MetricsMarkdown, docs/reference.md) lists exactly the families
// the controller process registers.
TEST(ControllerStartTest, MetricsMarkdownIsWhatTheProcessRegisters) {
  CannedHttpServer server([](const std::string&) -> CannedHttpServer::Reply {
    return {200, Page({}), ""};
  });
  k8s::RestConfig rest;
  rest.server = server.url();
  auto client = k8s::Client::Create(rest);
  ASSERT_TRUE(client.ok()) << client.status();
  std::string live;
  {
    absl::StatusOr<ControllerProcess> p =
        CreateControllerProcess(ControllerConfig{}, "127.0.0.1:0", "/metrics", client->get());
    ASSERT_TRUE(p.ok()) << p.status();
    live = metrics::DescribeMarkdown(*p->registry);
  }
  EXPECT_THAT(live, ::testing::HasSubstr(
                        "| `nvidia_dra_compute_domain_info` | gauge | `status` | Number of "));
  EXPECT_THAT(live, ::testing::HasSubstr("| `nvidia_dra_undecodable_objects_total` | counter | "));
  EXPECT_THAT(live, ::testing::HasSubstr("| `nvidia_dra_http_endpoint_connections_open` |"));
  EXPECT_EQ(MetricsMarkdown(), live);
}

}  // namespace
}  // namespace dra::cdcontroller
