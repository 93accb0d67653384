// The driver's in-call retries (driver.h) around DeviceState.

#include "lib/cdplugin/device_state_test_fixture.h"

namespace dra::cdplugin {
namespace {

class DriverTest : public DeviceStateTest {
 protected:
  kubeletplugin::DriverMetrics* Metrics() {
    if (!metrics_)
      metrics_ = std::make_unique<kubeletplugin::DriverMetrics>(&registry_, kDriverName, "n");
    return metrics_.get();
  }
  CdDriver Driver() {
    return CdDriver(state_.get(), Metrics(),
                    {.deadline_margin = absl::ZeroDuration(),
                     .backoff = {.initial = absl::Milliseconds(5), .max = absl::Milliseconds(20)},
                     .clock = RealClock::Get()});
  }
  metrics::Registry registry_;
  std::unique_ptr<kubeletplugin::DriverMetrics> metrics_;
};

TEST_F(DriverTest, RetriesUntilReadyWithinTheCall) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready_after_calls = 4;
  CdDriver driver = Driver();
  auto out =
      driver.PrepareResourceClaims({.request_id = 1, .deadline = absl::Now() + absl::Seconds(10)},
                                   {ChannelClaim("c1", "user-ns", "cd-1")});
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(out->at("c1").status.ok()) << out->at("c1").status;
  EXPECT_EQ(api_.ready_calls, 4);
  EXPECT_THAT(registry_.Render(),
              HasSubstr("nvidia_dra_prepared_devices{node=\"n\",driver=\"compute-domain.nvidia."
                        "com\",device_type=\"channel\"} 1"));
}

TEST_F(DriverTest, GivesUpBeforeTheDeadlineWithTheLastError) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  const absl::Time start = absl::Now();
  auto out = driver.PrepareResourceClaims({.deadline = start + absl::Milliseconds(300)},
                                          {ChannelClaim("c1", "user-ns", "cd-1")});
  ASSERT_TRUE(out.ok());
  const absl::Status& s = out->at("c1").status;
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("not ready"));
  EXPECT_THAT(s.message(), HasSubstr("the kubelet retries"));
  EXPECT_GT(api_.ready_calls, 3);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

// A channel claim waiting for its daemon does not hold up the daemon claim's prepare, which
// the kubelet sends in another call at the same time.
TEST_F(DriverTest, AWaitingChannelClaimDoesNotBlockTheDaemonClaim) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto channel = std::async(std::launch::async, [&] {
    return driver.PrepareResourceClaims({.deadline = absl::Now() + absl::Seconds(20)},
                                        {ChannelClaim("c1", "user-ns", "cd-1")});
  });
  auto ready_calls = [&] {
    absl::MutexLock l(&api_.mu);
    return api_.ready_calls;
  };
  while (ready_calls() < 2) absl::SleepFor(absl::Milliseconds(5));  // in its retry loop
  const absl::Time start = absl::Now();
  auto daemon = driver.PrepareResourceClaims({.deadline = absl::Now() + absl::Seconds(20)},
                                             {DaemonClaim("d1", "cd-1")});
  ASSERT_TRUE(daemon.ok());
  EXPECT_TRUE(daemon->at("d1").status.ok()) << daemon->at("d1").status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(channel.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  {
    absl::MutexLock l(&api_.mu);
    api_.ready.insert("cd-1");  // the daemon reports Ready
  }
  auto result = channel.get();
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->at("c1").status.ok()) << result->at("c1").status;
}

TEST_F(DriverTest, ShutdownEndsWaitingPrepares) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto channel = std::async(std::launch::async, [&] {
    return driver.PrepareResourceClaims({.deadline = absl::Now() + absl::Seconds(30)},
                                        {ChannelClaim("c1", "user-ns", "cd-1")});
  });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  driver.Shutdown();
  auto result = channel.get();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  ASSERT_TRUE(result.ok());
  EXPECT_THAT(result->at("c1").status.message(), HasSubstr("not ready"));
}

TEST_F(DriverTest, PermanentErrorsAreNotRetried) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto out = driver.PrepareResourceClaims(
      {.deadline = absl::Now() + absl::Seconds(10)},
      {ChannelClaim("c1", "wrong-ns", "cd-1"), DaemonClaim("d1", "cd-1")});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(out->at("c1").status.message(), HasSubstr("permanent error"));
  EXPECT_TRUE(out->at("d1").status.ok());  // the other claim of the call is unaffected
  EXPECT_EQ(api_.ready_calls, 0);
}

// The text the pod's events show, which users' alerts match: the public driver's prefix first,
// then (for a permanent error) the class, then the cause.
TEST_F(DriverTest, PrepareErrorsStartWithThePublicDriversWording) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto out = driver.PrepareResourceClaims(
      {.deadline = absl::Now() + absl::Milliseconds(300)},
      {ChannelClaim("c1", "wrong-ns", "cd-1"), ChannelClaim("c2", "user-ns", "cd-1")});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(std::string(out->at("c1").status.message()),
              ::testing::StartsWith("error preparing devices for claim wrong-ns/claim-c1:c1: "
                                    "permanent error (fix the claim or its ComputeDomain): "));
  // Retryable (the domain is not ready): no class.
  EXPECT_THAT(std::string(out->at("c2").status.message()),
              ::testing::StartsWith("error preparing devices for claim user-ns/claim-c2:c2: "));
  EXPECT_THAT(std::string(out->at("c2").status.message()),
              ::testing::Not(HasSubstr("permanent error")));
}

TEST_F(DriverTest, UnprepareErrorsStartWithThePublicDriversWording) {
  CdDriver driver = Driver();
  // The checkpoint cannot be read: every attempt fails.
  fs::remove(plugin_dir() + "/checkpoint.json");
  fs::create_directory(plugin_dir() + "/checkpoint.json");
  auto out = driver.UnprepareResourceClaims(
      {.deadline = absl::Now() + absl::Milliseconds(300)},
      {{.namespace_name = "user-ns", .name = "claim-c1", .uid = "c1"}});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(std::string(out->at("c1").message()),
              ::testing::StartsWith("error unpreparing devices for claim 'user-ns/claim-c1:c1': "));
}

}  // namespace
}  // namespace dra::cdplugin
