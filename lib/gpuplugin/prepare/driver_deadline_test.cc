// GpuDriver honours the kubelet's deadline (CallInfo::deadline): the wait for the prep/unprep lock
// and each step of a prepare take at most the time left, and a prepare cut short leaves what a
// failure of that step leaves (docs/prepare-flow.md "Deadlines").

#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"
#include "lib/gpuplugin/prepare/driver.h"
#include "lib/metrics/metrics.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;

// The lock timeout the driver had for every call before it honoured deadlines, and still has for
// calls without one: a prepare that waited this long did not stop at its own deadline.
constexpr absl::Duration kFixedLockTimeout = absl::Seconds(10);
// Slack for a busy test machine between a deadline and the failure it causes (the lock is polled
// every 100 ms).
constexpr absl::Duration kSlack = absl::Seconds(2);

class DriverDeadlineTest : public DeviceStateTest {
 protected:
  void Start(const std::string& gates = "") {
    Init("h100-8x");
    if (!gates.empty()) Configure(gates);
    driver_ = std::make_unique<GpuDriver>(state_.get(), tmp_.path() + "/plugin", &metrics_,
                                          kFixedLockTimeout);
  }
  kubeletplugin::PrepareResult PrepareWithin(const k8s::ResourceClaim& claim,
                                             absl::Duration timeout) {
    auto results = driver_->PrepareResourceClaims(
        {.request_id = 1, .deadline = absl::Now() + timeout}, {claim});
    EXPECT_TRUE(results.ok()) << results.status();
    if (!results.ok() || !results->contains(claim.metadata.uid)) return {absl::InternalError("?")};
    return results->at(claim.metadata.uid);
  }

  metrics::Registry registry_;
  DriverMetrics metrics_{&registry_, "gpu.nvidia.com", "node1"};
  std::unique_ptr<GpuDriver> driver_;
};

// Regression: a prepare queued behind another prepare of the same claim (the kubelet's retry of a
// call it gave up on, while the first is still starting an MPS daemon) waited the fixed 10 s for
// pu.lock, long after its own deadline.
TEST_F(DriverDeadlineTest, PrepareWaitingForTheLockStopsAtItsDeadlineAndChangesNothing) {
  Start("MPSSupport=true");
  const k8s::ResourceClaim claim = Claim("uid-1", {"gpu-2"}, GpuConfigEntry({{"strategy", "MPS"}}));
  absl::Notification first_started, release_first;
  mps_->on_start = [&] {
    first_started.Notify();
    release_first.WaitForNotification();
  };
  kubeletplugin::PrepareResult first;
  std::thread first_call([&] { first = PrepareWithin(claim, absl::Seconds(60)); });
  first_started.WaitForNotification();
  const std::optional<checkpoint::ClaimState> before = StateOf("uid-1");
  EXPECT_EQ(before, checkpoint::ClaimState::kPrepareStarted);

  const absl::Duration deadline = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  kubeletplugin::PrepareResult second = PrepareWithin(claim, deadline);
  const absl::Duration took = absl::Now() - start;

  EXPECT_EQ(second.status.code(), absl::StatusCode::kDeadlineExceeded) << second.status;
  EXPECT_THAT(second.status.message(),
              HasSubstr("error acquiring prep/unprep lock for prepare of claim uid-1"));
  EXPECT_TRUE(second.devices.empty());
  EXPECT_GE(took, deadline);
  EXPECT_LT(took, deadline + kSlack) << "waited like the fixed lock timeout";
  // The second call changed nothing: the first prepare's record is as it was, no spec yet.
  EXPECT_EQ(StateOf("uid-1"), before);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
  EXPECT_EQ(mps_->groups.size(), 1u);  // no second daemon was even planned

  release_first.Notify();
  first_call.join();
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
}

// The other side: with a generous deadline the prepare waits for the lock and succeeds.
TEST_F(DriverDeadlineTest, GenerousDeadlineWaitsForTheLockAndSucceeds) {
  Start();
  absl::Notification locked;
  std::thread holder([&] {
    absl::Status s = driver_->RunLocked([&] {
      locked.Notify();
      absl::SleepFor(absl::Milliseconds(500));
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
  });
  locked.WaitForNotification();
  kubeletplugin::PrepareResult result = PrepareWithin(Claim("uid-1", {"gpu-3"}), absl::Seconds(45));
  holder.join();
  ASSERT_TRUE(result.status.ok()) << result.status;
  ASSERT_EQ(result.devices.size(), 1u);
  EXPECT_EQ(result.devices[0].device_name, "gpu-3");
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
}

// A prepare whose deadline has passed by the time it holds the lock begins no step: no record, no
// CDI spec, and the error names the claim and the step.
TEST_F(DriverDeadlineTest, PrepareAfterItsDeadlineBeginsNothing) {
  Start();
  kubeletplugin::PrepareResult result =
      PrepareWithin(Claim("uid-1", {"gpu-3"}), -absl::Milliseconds(1));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
  EXPECT_THAT(result.status.message(), HasSubstr("prepare of claim uid-1: set up devices: not "
                                                 "begun, the caller's deadline passed"));
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
}

// nvidia-smi (time-slicing) gets the time left, not its own 30 s. The claim stays PrepareStarted,
// so the kubelet's retry rolls the time-slice back before it prepares again.
TEST_F(DriverDeadlineTest, TimeSlicingStopsAtTheDeadlineAndTheRetryRollsBack) {
  Start("TimeSlicingSettings=true");
  WrapNvidiaSmi("sleep 5\nexec \"$0.real\" \"$@\"");
  const k8s::ResourceClaim claim = Claim("uid-1", {"gpu-3"}, TimeSliced("Long"));
  const absl::Duration deadline = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  kubeletplugin::PrepareResult result = PrepareWithin(claim, deadline);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
  EXPECT_THAT(result.status.message(), HasSubstr("uid-1"));
  EXPECT_THAT(result.status.message(), HasSubstr("set time-slice Long on GPU " + Uuid("gpu-3")));
  EXPECT_LT(took, deadline + kSlack);
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));

  RestoreNvidiaSmi();
  result = PrepareWithin(claim, absl::Seconds(45));
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Long");
}

}  // namespace
}  // namespace dra::gpu
