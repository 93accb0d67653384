// DeviceState with adminAccess claims (KEP-5018): a monitoring claim may get devices other claims
// hold; its prepare and unprepare leave the sharing state (time-slices, MPS daemons) and the other
// claims' CDI specs and records alone, and it does not keep a workload's time-slice alive.

#include "lib/gpuplugin/prepare/device_state_test_fixture.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class AdminAccessTest : public DeviceStateTest {
 protected:
  // Claim() with every result allocated with adminAccess, as the scheduler does for a request
  // with adminAccess: true in a namespace labelled resource.kubernetes.io/admin-access.
  k8s::ResourceClaim AdminClaim(const std::string& uid, const std::vector<std::string>& devices,
                                nlohmann::json config = nlohmann::json::array()) {
    k8s::ResourceClaim c = Claim(uid, devices, std::move(config));
    for (auto& r : c.status.allocation->devices.results) r.admin_access = true;
    return c;
  }
  // The checkpoint record of `uid` as JSON, for before/after comparisons.
  nlohmann::json Record(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok() && c->has_value()) << uid;
    if (!c.ok() || !c->has_value()) return nullptr;
    return {{"state", checkpoint::ClaimStateName((*c)->state)},
            {"devices", (*c)->prepared_devices},
            {"steps", (*c)->steps}};
  }
};

TEST_F(AdminAccessTest, AdminClaimOnATimeSlicedGpuChangesNoTimeSliceAndNoOtherClaim) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("workload", {"gpu-2"}, TimeSliced("Long"))).ok());
  ASSERT_EQ(GpuSetting("gpu-2"), "Default/Long");
  const std::string spec = ReadFile(SpecPath("workload"));
  const nlohmann::json record = Record("workload");

  // A sharing config reaches the admin claim too (here from the claim; a DeviceClass config
  // would do the same): it must not be applied to devices the claim only observes.
  auto admin = state_->Prepare(AdminClaim("monitor", {"gpu-2", "gpu-3"}, TimeSliced("Short")));
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Default");
  ASSERT_EQ(admin->size(), 2u);
  for (const RecordedDevice& d : *admin) {
    EXPECT_TRUE(d.admin_access) << d.kubelet.device_name;
    EXPECT_EQ(d.time_slice_applied, false) << d.kubelet.device_name;
  }
  const nlohmann::json monitor = Record("monitor");
  for (const auto& step : monitor["steps"]) {
    EXPECT_NE(step.value("name", ""), "timeSlicing") << step;
  }
  EXPECT_TRUE(std::filesystem::exists(SpecPath("monitor")));
  EXPECT_EQ(ReadFile(SpecPath("workload")), spec);
  EXPECT_EQ(Record("workload"), record);

  ASSERT_TRUE(state_->Unprepare("monitor").ok());
  EXPECT_EQ(GpuSetting("gpu-2"), "Default/Long");
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Default");
  EXPECT_FALSE(std::filesystem::exists(SpecPath("monitor")));
  EXPECT_EQ(ReadFile(SpecPath("workload")), spec);
  EXPECT_EQ(Record("workload"), record);
}

TEST_F(AdminAccessTest, AdminClaimDoesNotKeepAWorkloadsTimeSliceAfterTheWorkloadGoes) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("workload", {"gpu-4"}, TimeSliced("Medium"))).ok());
  ASSERT_TRUE(state_->Prepare(AdminClaim("monitor", {"gpu-4"})).ok());
  ASSERT_EQ(GpuSetting("gpu-4"), "Default/Medium");
  // The monitor observes the GPU and relies on no setting of it: the workload's reset happens.
  ASSERT_TRUE(state_->Unprepare("workload").ok());
  EXPECT_EQ(GpuSetting("gpu-4"), "Default/Default");
  ASSERT_TRUE(state_->Unprepare("monitor").ok());
  EXPECT_EQ(GpuSetting("gpu-4"), "Default/Default");
}

TEST_F(AdminAccessTest, AdminClaimOnAnMpsGpuStartsAndStopsNoDaemon) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const nlohmann::json mps = GpuConfigEntry({{"strategy", "MPS"}});
  ASSERT_TRUE(state_->Prepare(Claim("workload", {"gpu-1"}, mps)).ok());
  ASSERT_EQ(mps_->groups.size(), 1u);
  const std::vector<std::string> calls = mps_->calls;
  const std::string spec = ReadFile(SpecPath("workload"));
  const nlohmann::json record = Record("workload");

  auto admin = state_->Prepare(AdminClaim("monitor", {"gpu-1", "gpu-6"}, mps));
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ(mps_->groups.size(), 1u);
  EXPECT_EQ(mps_->calls, calls);
  for (const RecordedDevice& d : *admin)
    EXPECT_FALSE(d.mps_daemon.has_value()) << d.kubelet.device_name;
  // The monitor's container joins no MPS daemon.
  EXPECT_THAT(ReadFile(SpecPath("monitor")), Not(HasSubstr("CUDA_MPS_PIPE_DIRECTORY")));
  EXPECT_EQ(ReadFile(SpecPath("workload")), spec);

  ASSERT_TRUE(state_->Unprepare("monitor").ok());
  EXPECT_EQ(mps_->calls, calls);  // no stop
  EXPECT_EQ(ReadFile(SpecPath("workload")), spec);
  EXPECT_EQ(Record("workload"), record);
}

TEST_F(AdminAccessTest, AdminClaimGetsADeviceAnotherClaimHoldsWithoutConsumableShares) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("workload", {"gpu-0"})).ok());
  auto admin = state_->Prepare(AdminClaim("monitor", {"gpu-0", "gpu-1"}));
  ASSERT_TRUE(admin.ok()) << admin.status();
  // The other way round too: a workload may get a device a monitor observes.
  ASSERT_TRUE(state_->Prepare(Claim("workload-2", {"gpu-1"})).ok());
  // Two workloads still may not.
  auto clash = state_->Prepare(Claim("workload-3", {"gpu-0"}));
  ASSERT_FALSE(clash.ok());
  EXPECT_THAT(std::string(clash.status().message()), HasSubstr("already allocated"));
}

}  // namespace
}  // namespace dra::gpu
