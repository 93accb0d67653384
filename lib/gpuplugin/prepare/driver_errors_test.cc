// The text of a claim's prepare or unprepare failure, which the kubelet shows in the pod's events
// and users' alerts match: the public driver's "error preparing devices for claim
// <namespace>/<name>:<uid>: " (or "error unpreparing ...") first, whatever the cause
// (docs/prepare-flow.md "Errors").

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/file_lock.h"
#include "lib/gpuplugin/prepare/device_state_test_fixture.h"
#include "lib/gpuplugin/prepare/driver.h"
#include "lib/metrics/metrics.h"

namespace dra::gpu {
namespace {

using ::testing::StartsWith;

constexpr char kPrepare[] = "error preparing devices for claim ns/claim-uid-1:uid-1: ";
constexpr char kUnprepare[] = "error unpreparing devices for claim ns/claim-uid-1:uid-1: ";

class DriverErrorsTest : public DeviceStateTest {
 protected:
  void Start(const std::string& gates = "") {
    Init("h100-8x");
    if (!gates.empty()) Configure(gates);
    driver_ = std::make_unique<GpuDriver>(state_.get(), tmp_.path() + "/plugin", &metrics_,
                                          absl::Milliseconds(200));
  }
  absl::Status Prepare(const k8s::ResourceClaim& claim) {
    auto results = driver_->PrepareResourceClaims({.request_id = 1}, {claim});
    EXPECT_TRUE(results.ok()) << results.status();
    if (!results.ok() || !results->contains(claim.metadata.uid)) return absl::InternalError("?");
    return results->at(claim.metadata.uid).status;
  }
  absl::Status Unprepare(const std::string& uid) {
    const kubeletplugin::ClaimRef ref{.namespace_name = "ns", .name = "claim-" + uid, .uid = uid};
    auto results = driver_->UnprepareResourceClaims({.request_id = 2}, {ref});
    EXPECT_TRUE(results.ok()) << results.status();
    if (!results.ok() || !results->contains(uid)) return absl::InternalError("?");
    return results->at(uid);
  }

  metrics::Registry registry_;
  DriverMetrics metrics_{&registry_, "gpu.nvidia.com", "node1"};
  std::unique_ptr<GpuDriver> driver_;
};

TEST_F(DriverErrorsTest, APermanentPrepareErrorHasThePublicPrefixThenItsClass) {
  Start();  // TimeSlicingSettings off: the claim's config is refused
  const absl::Status s = Prepare(Claim("uid-1", {"gpu-2"}, TimeSliced("Long")));
  EXPECT_THAT(std::string(s.message()),
              StartsWith(absl::StrCat(kPrepare,
                                      "permanent error (fix the claim or its device "
                                      "class): ")));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("TimeSlicingSettings"));
}

TEST_F(DriverErrorsTest, ARetryablePrepareErrorHasThePublicPrefix) {
  Start("MPSSupport=true");
  mps_->start_status = absl::UnavailableError("create Deployment: connection refused");
  const absl::Status s = Prepare(Claim("uid-1", {"gpu-2"}, GpuConfigEntry({{"strategy", "MPS"}})));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), StartsWith(kPrepare));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("connection refused"));
  EXPECT_THAT(std::string(s.message()), ::testing::Not(::testing::HasSubstr("permanent")));
}

TEST_F(DriverErrorsTest, ALockTimeoutHasThePublicPrefixForPrepareAndUnprepare) {
  Start();
  auto held = FileLock::Acquire(tmp_.path() + "/plugin/pu.lock", absl::Seconds(1));
  ASSERT_TRUE(held.ok()) << held.status();
  const absl::Status prepare = Prepare(Claim("uid-1", {"gpu-2"}));
  EXPECT_THAT(std::string(prepare.message()),
              StartsWith(absl::StrCat(kPrepare, "error acquiring prep/unprep lock")));
  const absl::Status unprepare = Unprepare("uid-1");
  EXPECT_THAT(std::string(unprepare.message()),
              StartsWith(absl::StrCat(kUnprepare, "error acquiring prep/unprep lock")));
}

TEST_F(DriverErrorsTest, AnUnprepareErrorHasThePublicPrefix) {
  Start("MPSSupport=true");
  ASSERT_TRUE(Prepare(Claim("uid-1", {"gpu-2"}, GpuConfigEntry({{"strategy", "MPS"}}))).ok());
  mps_->stop_status = absl::DeadlineExceededError("pods still present");
  const absl::Status s = Unprepare("uid-1");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), StartsWith(kUnprepare));
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("pods still present"));
}

}  // namespace
}  // namespace dra::gpu
