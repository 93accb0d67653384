#include "lib/metrics/metrics.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricsTest, CounterAndGaugeRenderWithLabelsInRegistrationOrder) {
  Registry r;
  auto* requests =
      r.AddCounter("nvidia_dra_requests_total", "Successful requests.", {"driver", "operation"});
  auto* inflight =
      r.AddGauge("nvidia_dra_requests_inflight", "In flight.", {"driver", "operation"});
  requests->WithLabels({"gpu.nvidia.com", "prepare"})->Inc();
  requests->WithLabels({"gpu.nvidia.com", "prepare"})->Inc(2);
  requests->WithLabels({"gpu.nvidia.com", "unprepare"});  // pre-created at zero
  inflight->WithLabels({"gpu.nvidia.com", "prepare"})->Inc();
  inflight->WithLabels({"gpu.nvidia.com", "prepare"})->Dec();
  EXPECT_EQ(r.Render(),
            "# HELP nvidia_dra_requests_total Successful requests.\n"
            "# TYPE nvidia_dra_requests_total counter\n"
            "nvidia_dra_requests_total{driver=\"gpu.nvidia.com\",operation=\"prepare\"} 3\n"
            "nvidia_dra_requests_total{driver=\"gpu.nvidia.com\",operation=\"unprepare\"} 0\n"
            "# HELP nvidia_dra_requests_inflight In flight.\n"
            "# TYPE nvidia_dra_requests_inflight gauge\n"
            "nvidia_dra_requests_inflight{driver=\"gpu.nvidia.com\",operation=\"prepare\"} 0\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithShortestBounds) {
  Registry r;
  auto* h = r.AddHistogram("d_seconds", "Durations.", {"op"}, ExponentialBuckets(0.05, 2, 3));
  auto* s = h->WithLabels({"prepare"});
  s->Observe(0.01);
  s->Observe(0.07);
  s->Observe(5);
  std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{op=\"prepare\",le=\"0.05\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{op=\"prepare\",le=\"0.1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{op=\"prepare\",le=\"0.2\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{op=\"prepare\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_sum{op=\"prepare\"} 5.08\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_count{op=\"prepare\"} 3\n"));
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(MetricsTest, ConcurrentIncrementsAreNotLost) {
  Registry r;
  auto* c = r.AddCounter("c_total", "c", {})->WithLabels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([c] {
      for (int i = 0; i < 10000; ++i) c->Inc();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->Value(), 40000);
}

TEST(MetricsTest, DescribeListsFamiliesWithoutSeriesAndMarkdownSortsThem) {
  Registry r;
  r.AddGauge("z_open", "Open now.", {});
  r.AddHistogram("a_seconds", "How long | total.", {"op", "code"}, {0.1, 1});
  r.AddCounter("m_total", "Count.", {"kind"})->WithLabels({"x"})->Inc();

  std::vector<Registry::FamilyInfo> d = r.Describe();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "z_open");
  EXPECT_EQ(d[0].type, Type::kGauge);
  EXPECT_EQ(d[1].labels, (std::vector<std::string>{"op", "code"}));
  EXPECT_EQ(d[2].type, Type::kCounter);
  EXPECT_EQ(d[2].help, "Count.");

  EXPECT_EQ(DescribeMarkdown(r),
            "| `a_seconds` | histogram | `op`, `code` | How long \\| total. |\n"
            "| `m_total` | counter | `kind` | Count. |\n"
            "| `z_open` | gauge | - | Open now. |\n");
}

}  // namespace
}  // namespace dra::metrics
