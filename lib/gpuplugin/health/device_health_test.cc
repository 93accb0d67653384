#include "lib/gpuplugin/health/device_health.h"

#include <dlfcn.h>

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/clock.h"
#include "lib/gpuplugin/mig/mig_manager.h"
#include "test/doubles/mock-nvml/mock_nvml_ext.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using kubeletplugin::HealthStatus;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

std::vector<std::string> TaintStrings(const DeviceHealthTracker& t, const std::string& device) {
  std::vector<std::string> out;
  for (const k8s::DeviceTaint& taint : t.Taints(device)) {
    out.push_back(taint.key + "=" + taint.value + ":" + taint.effect);
    EXPECT_FALSE(taint.time_added.has_value()) << "the API server stamps timeAdded";
  }
  return out;
}

HealthStatus StatusOf(const DeviceHealthTracker& t, const std::string& device) {
  for (const auto& h : t.HealthList()) {
    if (h.device_name == device) return h.status;
  }
  ADD_FAILURE() << "no health entry for " << device;
  return HealthStatus::kUnknown;
}

TEST(DeviceHealthTrackerTest, StartsHealthyWithoutTaints) {
  DeviceHealthTracker t("node-a", {"gpu-0", "gpu-1"}, {});
  auto list = t.HealthList();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].pool_name, "node-a");
  EXPECT_EQ(list[0].device_name, "gpu-0");
  EXPECT_EQ(list[0].status, HealthStatus::kHealthy);
  EXPECT_THAT(t.Taints("gpu-0"), IsEmpty());
}

struct XidCase {
  uint64_t xid;
  std::set<uint64_t> additional;
  std::string want_taint;
  HealthStatus want_status;
};

class XidTest : public ::testing::TestWithParam<XidCase> {};

TEST_P(XidTest, TaintAndHealth) {
  const XidCase& c = GetParam();
  DeviceHealthTracker t("node-a", {"gpu-0", "gpu-1"}, c.additional);
  EXPECT_TRUE(t.OnXid("gpu-0", c.xid, kT0));
  EXPECT_THAT(TaintStrings(t, "gpu-0"), ElementsAre(c.want_taint));
  EXPECT_EQ(StatusOf(t, "gpu-0"), c.want_status);
  // Other devices are untouched.
  EXPECT_THAT(t.Taints("gpu-1"), IsEmpty());
  EXPECT_EQ(StatusOf(t, "gpu-1"), HealthStatus::kHealthy);
}

INSTANTIATE_TEST_SUITE_P(
    Xids, XidTest,
    ::testing::Values(
        XidCase{79, {}, "gpu.nvidia.com/xid=79:NoSchedule", HealthStatus::kUnhealthy},
        XidCase{48, {}, "gpu.nvidia.com/xid=48:NoSchedule", HealthStatus::kUnhealthy},
        XidCase{13, {}, "gpu.nvidia.com/xid=13:None", HealthStatus::kHealthy},
        XidCase{31, {}, "gpu.nvidia.com/xid=31:None", HealthStatus::kHealthy},
        XidCase{43, {}, "gpu.nvidia.com/xid=43:None", HealthStatus::kHealthy},
        XidCase{45, {}, "gpu.nvidia.com/xid=45:None", HealthStatus::kHealthy},
        XidCase{68, {}, "gpu.nvidia.com/xid=68:None", HealthStatus::kHealthy},
        XidCase{109, {}, "gpu.nvidia.com/xid=109:None", HealthStatus::kHealthy},
        XidCase{79, {79}, "gpu.nvidia.com/xid=79:None", HealthStatus::kHealthy},
        XidCase{94, {79, 95}, "gpu.nvidia.com/xid=94:NoSchedule", HealthStatus::kUnhealthy}));

TEST(DeviceHealthTrackerTest, OneTaintPerKeyLatestWins) {
  DeviceHealthTracker t("n", {"gpu-0"}, {});
  EXPECT_TRUE(t.OnXid("gpu-0", 79, kT0));
  EXPECT_FALSE(t.OnXid("gpu-0", 79, kT0 + absl::Seconds(1))) << "same XID again is no change";
  EXPECT_TRUE(t.OnXid("gpu-0", 13, kT0 + absl::Seconds(2)));
  EXPECT_THAT(TaintStrings(t, "gpu-0"), ElementsAre("gpu.nvidia.com/xid=13:None"));
  // The device stays unhealthy: an ignorable XID does not heal it.
  EXPECT_EQ(StatusOf(t, "gpu-0"), HealthStatus::kUnhealthy);
}

TEST(DeviceHealthTrackerTest, GpuLostAndUnmonitored) {
  DeviceHealthTracker t("n", {"gpu-0", "gpu-1", "gpu-2"}, {});
  EXPECT_TRUE(t.OnGpuLost({"gpu-0", "gpu-1"}, kT0));
  EXPECT_FALSE(t.OnGpuLost({"gpu-0"}, kT0)) << "already lost";
  EXPECT_THAT(TaintStrings(t, "gpu-0"), ElementsAre("gpu.nvidia.com/gpu-lost=:NoSchedule"));
  EXPECT_EQ(StatusOf(t, "gpu-1"), HealthStatus::kUnhealthy);

  EXPECT_TRUE(t.OnUnmonitored({"gpu-1", "gpu-2"}, "events not supported", kT0));
  EXPECT_THAT(TaintStrings(t, "gpu-2"), ElementsAre("gpu.nvidia.com/unmonitored=:None"));
  EXPECT_EQ(StatusOf(t, "gpu-2"), HealthStatus::kUnknown);
  EXPECT_EQ(StatusOf(t, "gpu-1"), HealthStatus::kUnhealthy) << "unhealthy is not downgraded";
  EXPECT_THAT(TaintStrings(t, "gpu-1"), ElementsAre("gpu.nvidia.com/gpu-lost=:NoSchedule",
                                                    "gpu.nvidia.com/unmonitored=:None"));
}

TEST(DeviceHealthTrackerTest, UnknownDevicesAreIgnored) {
  DeviceHealthTracker t("n", {"gpu-0"}, {});
  EXPECT_FALSE(t.OnXid("vfio-0", 79, kT0));
  EXPECT_FALSE(t.OnGpuLost({"nope"}, kT0));
  EXPECT_EQ(t.HealthList().size(), 1u);
}

TEST(DeviceHealthTrackerTest, ApplyTaintsAddsToPublishedDevices) {
  DeviceHealthTracker t("n", {"gpu-0", "gpu-1"}, {});
  t.OnXid("gpu-1", 79, kT0);
  std::vector<k8s::Device> devices(3);
  devices[0].name = "gpu-0";
  devices[1].name = "gpu-1";
  devices[2].name = "other";
  t.ApplyTaints(devices);
  EXPECT_THAT(devices[0].taints, IsEmpty());
  ASSERT_EQ(devices[1].taints.size(), 1u);
  EXPECT_EQ(devices[1].taints[0].value, "79");
  EXPECT_THAT(devices[2].taints, IsEmpty());
}

// ---- Recovery (quiet period) ----

TEST(DeviceHealthRecoveryTest, DisabledByDefault) {
  DeviceHealthTracker t("n", {"gpu-0"}, {});
  ASSERT_TRUE(t.OnXid("gpu-0", 79, kT0));
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Hours(1000)), IsEmpty());
  EXPECT_FALSE(t.Recover("gpu-0", kT0 + absl::Hours(1000)).has_value());
  EXPECT_THAT(TaintStrings(t, "gpu-0"), ElementsAre("gpu.nvidia.com/xid=79:NoSchedule"));
}

TEST(DeviceHealthRecoveryTest, EveryCriticalXidRestartsTheQuietPeriod) {
  DeviceHealthTracker t("n", {"gpu-0", "gpu-1"}, {}, absl::Minutes(5));
  ASSERT_TRUE(t.OnXid("gpu-0", 79, kT0));
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Minutes(5) - absl::Seconds(1)), IsEmpty());
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Minutes(5)), ElementsAre("gpu-0"));
  // The same XID again changes no taint but still counts as a new fault.
  EXPECT_FALSE(t.OnXid("gpu-0", 79, kT0 + absl::Minutes(3)));
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Minutes(7)), IsEmpty());
  EXPECT_FALSE(t.Recover("gpu-0", kT0 + absl::Minutes(7)).has_value()) << "not due yet";
  EXPECT_EQ(StatusOf(t, "gpu-0"), HealthStatus::kUnhealthy);
  // An ignorable XID is no fault: it neither restarts the period nor blocks recovery.
  EXPECT_TRUE(t.OnXid("gpu-0", 13, kT0 + absl::Minutes(7)));
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Minutes(8)), ElementsAre("gpu-0"));

  std::optional<absl::Duration> was = t.Recover("gpu-0", kT0 + absl::Minutes(8));
  ASSERT_TRUE(was.has_value());
  EXPECT_EQ(*was, absl::Minutes(8)) << "unhealthy since the first XID";
  EXPECT_THAT(t.Taints("gpu-0"), IsEmpty());
  EXPECT_EQ(StatusOf(t, "gpu-0"), HealthStatus::kHealthy);
  for (const auto& h : t.HealthList()) {
    if (h.device_name != "gpu-0") continue;
    EXPECT_EQ(h.last_updated, kT0 + absl::Minutes(8));
    EXPECT_THAT(h.message, ::testing::HasSubstr("recovered"));
  }
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Hours(1)), IsEmpty()) << "nothing left to recover";
  EXPECT_FALSE(t.Recover("gpu-0", kT0 + absl::Hours(1)).has_value());

  // A new XID after recovery taints it again and starts a new period.
  EXPECT_TRUE(t.OnXid("gpu-0", 48, kT0 + absl::Hours(2)));
  EXPECT_THAT(TaintStrings(t, "gpu-0"), ElementsAre("gpu.nvidia.com/xid=48:NoSchedule"));
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Hours(2) + absl::Minutes(5)), ElementsAre("gpu-0"));
}

TEST(DeviceHealthRecoveryTest, OnlyFaultsRecover) {
  DeviceHealthTracker t("n", {"app", "lost", "unmonitored"}, {}, absl::Seconds(10));
  ASSERT_TRUE(t.OnXid("app", 13, kT0));
  ASSERT_TRUE(t.OnGpuLost({"lost"}, kT0));
  ASSERT_TRUE(t.OnUnmonitored({"unmonitored"}, "no events", kT0));
  // Only the lost GPU was unhealthy; an application XID keeps its None taint, unmonitored stays.
  EXPECT_THAT(t.RecoveryDue(kT0 + absl::Hours(1)), ElementsAre("lost"));
  ASSERT_TRUE(t.Recover("lost", kT0 + absl::Hours(1)).has_value());
  EXPECT_THAT(t.Taints("lost"), IsEmpty());
  EXPECT_EQ(StatusOf(t, "lost"), HealthStatus::kHealthy);
  EXPECT_FALSE(t.Recover("app", kT0 + absl::Hours(1)).has_value());
  EXPECT_THAT(TaintStrings(t, "app"), ElementsAre("gpu.nvidia.com/xid=13:None"));
  EXPECT_FALSE(t.Recover("unmonitored", kT0 + absl::Hours(1)).has_value());
  EXPECT_EQ(StatusOf(t, "unmonitored"), HealthStatus::kUnknown);
}

TEST(ParseAdditionalIgnoredXidsTest, SkipsNonIntegers) {
  EXPECT_EQ(ParseAdditionalIgnoredXids(""), std::set<uint64_t>{});
  EXPECT_EQ(ParseAdditionalIgnoredXids("79, 48,x,-3,,94"), (std::set<uint64_t>{48, 79, 94}));
}

TEST(DevicePlacementsTest, GpusAndMigDevices) {
  Inventory inv;
  AllocatableDevice gpu;
  gpu.name = "gpu-0";
  gpu.gpu.uuid = "GPU-a";
  AllocatableDevice mig;
  mig.name = "gpu-1-mig-1g5gb-19-0";
  mig.type = DeviceType::kMig;
  mig.gpu.uuid = "GPU-b";
  mig.mig = MigInfo{.uuid = "MIG-x", .parent_uuid = "GPU-b", .gi_id = 7, .ci_id = 0};
  AllocatableDevice vfio;
  vfio.name = "gpu-vfio-2";
  vfio.type = DeviceType::kVfio;
  inv.devices = {gpu, mig, vfio};
  auto p = DevicePlacements(inv);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ((p[{"GPU-a", 0xffffffff, 0xffffffff}]), "gpu-0");
  EXPECT_EQ((p[{"GPU-b", 7, 0}]), "gpu-1-mig-1g5gb-19-0");
}

// ---- The monitor against the mock NVML: events injected into the mock's shared state ----

class MonitorTest : public ::testing::Test {
 protected:
  void Start(const std::string& profile, DeviceHealthMonitor::Options options = {},
             absl::Duration quiet_period = absl::ZeroDuration(), bool dynamic_mig = false) {
    root_ = dir_.path() + "/driver-root";
    absl::Status made = testing::MakeMockDriverRoot(profile, root_);
    ASSERT_TRUE(made.ok()) << made;
    auto nvml = nvml::Nvml::Create(root_);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = *std::move(nvml);
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    auto inv =
        Discover(*session, {.sysfs_root = dir_.path() + "/no-sys", .dynamic_mig = dynamic_mig});
    ASSERT_TRUE(inv.ok()) << inv.status();
    inventory_ = *std::move(inv);
    tracker_ = std::make_unique<DeviceHealthTracker>("node", MonitoredDevices(inventory_),
                                                     std::set<uint64_t>{}, quiet_period);
    options.wait_timeout = absl::Milliseconds(100);
    auto monitor = DeviceHealthMonitor::Start(
        nvml_.get(), inventory_, tracker_.get(),
        [this] {
          absl::MutexLock lock(&mu_);
          ++changes_;
        },
        options);
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    monitor_ = *std::move(monitor);
  }

  // Calls the mock's injection entry point in the already loaded library.
  void Inject(const std::string& uuid, uint64_t xid, uint32_t gi = 0xffffffff,
              uint32_t ci = 0xffffffff) {
    void* lib = dlopen(nvml_->library_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto* inject =
        reinterpret_cast<mock_nvml::MockNvmlInjectEventFn*>(dlsym(lib, "mockNvmlInjectEvent"));
    ASSERT_NE(inject, nullptr);
    EXPECT_EQ(inject(uuid.c_str(), nvml::kEventTypeXidCriticalError, xid, gi, ci), 0);
    dlclose(lib);
  }

  // Waits (bounded) until the monitor reported `n` changes.
  bool WaitForChanges(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return changes_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(20));
  }

  const AllocatableDevice& DeviceOfType(DeviceType type) {
    for (const AllocatableDevice& d : inventory_.devices) {
      if (d.type == type) return d;
    }
    ADD_FAILURE() << "no device of type " << DeviceTypeName(type);
    return inventory_.devices.front();
  }

  std::string DeviceWithUuid(const std::string& uuid) {
    for (const AllocatableDevice& d : inventory_.devices) {
      if (d.type == DeviceType::kGpu && d.gpu.uuid == uuid) return d.name;
    }
    ADD_FAILURE() << "no GPU " << uuid;
    return "";
  }
  std::optional<std::string> FindUuid(unsigned int index) {
    for (const AllocatableDevice& d : inventory_.devices) {
      if (d.type == DeviceType::kGpu && d.gpu.index == index) return d.gpu.uuid;
    }
    ADD_FAILURE() << "no GPU " << index;
    return std::nullopt;
  }

  testing::TempDir dir_;
  std::string root_;
  std::unique_ptr<nvml::Nvml> nvml_;
  Inventory inventory_;
  std::unique_ptr<DeviceHealthTracker> tracker_;
  std::unique_ptr<DeviceHealthMonitor> monitor_;
  absl::Mutex mu_;
  int changes_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(MonitorTest, XidOnFullGpuTaintsThatGpuOnly) {
  Start("h100-8x");
  const AllocatableDevice& gpu = DeviceOfType(DeviceType::kGpu);
  Inject(gpu.gpu.uuid, 79);
  ASSERT_TRUE(WaitForChanges(1));
  EXPECT_THAT(TaintStrings(*tracker_, gpu.name), ElementsAre("gpu.nvidia.com/xid=79:NoSchedule"));
  int tainted = 0;
  for (const AllocatableDevice& d : inventory_.devices)
    tainted += !tracker_->Taints(d.name).empty();
  EXPECT_EQ(tainted, 1);
  monitor_->Stop();
}

TEST_F(MonitorTest, XidOnMigDeviceFindsItByInstanceIds) {
  Start("a100-mig-4x");
  const AllocatableDevice& mig = DeviceOfType(DeviceType::kMig);
  // An event for an instance that backs no device is ignored; the next one counts.
  Inject(mig.mig->parent_uuid, 48, 4242, 0);
  Inject(mig.mig->parent_uuid, 48, mig.mig->gi_id, mig.mig->ci_id);
  ASSERT_TRUE(WaitForChanges(1));
  EXPECT_THAT(TaintStrings(*tracker_, mig.name), ElementsAre("gpu.nvidia.com/xid=48:NoSchedule"));
  EXPECT_EQ(StatusOf(*tracker_, mig.name), HealthStatus::kUnhealthy);
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(changes_, 1);
}

// The monitor re-checks a quiet device on the fake clock's time and recovers it when the probe
// (the real NVML queries against the mock by default) succeeds.
TEST_F(MonitorTest, RecoversAfterTheQuietPeriodWhenNvmlAnswers) {
  FakeClock clock;
  absl::Mutex rmu;
  std::vector<std::string> recovered;
  DeviceHealthMonitor::Options options;
  options.clock = &clock;
  options.on_recovered = [&](const std::string& device, absl::Duration was) {
    absl::MutexLock lock(&rmu);
    recovered.push_back(device);
    EXPECT_EQ(was, absl::Minutes(5));
  };
  Start("h100-8x", options, absl::Minutes(5));
  const AllocatableDevice& gpu = DeviceOfType(DeviceType::kGpu);
  Inject(gpu.gpu.uuid, 79);
  ASSERT_TRUE(WaitForChanges(1));
  // A few more loop rounds before the period is over recover nothing.
  clock.Advance(absl::Minutes(4));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(StatusOf(*tracker_, gpu.name), HealthStatus::kUnhealthy);
  clock.Advance(absl::Minutes(1));
  ASSERT_TRUE(WaitForChanges(2));
  EXPECT_THAT(tracker_->Taints(gpu.name), IsEmpty());
  EXPECT_EQ(StatusOf(*tracker_, gpu.name), HealthStatus::kHealthy);
  monitor_->Stop();
  absl::MutexLock lock(&rmu);
  EXPECT_THAT(recovered, ElementsAre(gpu.name));
}

TEST_F(MonitorTest, FailedProbeKeepsTheDeviceUnhealthyUntilItPasses) {
  FakeClock clock;
  absl::Mutex pmu;
  absl::Status answer = absl::UnavailableError("GPU is lost");
  int probes = 0;
  DeviceHealthMonitor::Options options;
  options.clock = &clock;
  options.probe = [&](const std::string&) {
    absl::MutexLock lock(&pmu);
    ++probes;
    return answer;
  };
  Start("h100-8x", options, absl::Seconds(30));
  const AllocatableDevice& gpu = DeviceOfType(DeviceType::kGpu);
  Inject(gpu.gpu.uuid, 48);
  ASSERT_TRUE(WaitForChanges(1));
  clock.Advance(absl::Minutes(1));
  {
    absl::MutexLock lock(&pmu);
    auto probed = [&]() ABSL_SHARED_LOCKS_REQUIRED(pmu) { return probes >= 2; };
    ASSERT_TRUE(pmu.AwaitWithTimeout(absl::Condition(&probed), absl::Seconds(20)));
  }
  EXPECT_EQ(StatusOf(*tracker_, gpu.name), HealthStatus::kUnhealthy);
  EXPECT_THAT(TaintStrings(*tracker_, gpu.name), ElementsAre("gpu.nvidia.com/xid=48:NoSchedule"));
  {
    absl::MutexLock lock(&pmu);
    answer = absl::OkStatus();
  }
  ASSERT_TRUE(WaitForChanges(2));
  EXPECT_EQ(StatusOf(*tracker_, gpu.name), HealthStatus::kHealthy);
}

// DynamicMIG: a MIG device created after the monitor started (as prepare does) is found by its GPU
// instance's profile and placement; its XID taints that device only, and it recovers.
TEST_F(MonitorTest, XidOnDynamicMigDeviceTaintsThatDeviceAndRecovers) {
  FakeClock clock;
  DeviceHealthMonitor::Options options;
  options.clock = &clock;
  Start("h100-8x", options, absl::Minutes(5), /*dynamic_mig=*/true);
  const AllocatableDevice* spec = inventory_.Find("gpu-0-mig-1g10gb-19-3");
  ASSERT_NE(spec, nullptr);
  ASSERT_TRUE(spec->mig && spec->mig->dynamic);
  EXPECT_EQ(StatusOf(*tracker_, spec->name), HealthStatus::kHealthy) << "watched before creation";
  auto session = nvml_->Open();
  ASSERT_TRUE(session.ok()) << session.status();
  MigManager mig(&*session);
  absl::StatusOr<MigInfo> created = mig.Create(*spec->mig);
  ASSERT_TRUE(created.ok()) << created.status();
  // Another instance beside it, so that the placement, not the GPU alone, decides.
  const AllocatableDevice* other = inventory_.Find("gpu-0-mig-1g10gb-19-5");
  ASSERT_NE(other, nullptr);
  absl::StatusOr<MigInfo> created_other = mig.Create(*other->mig);
  ASSERT_TRUE(created_other.ok()) << created_other.status();

  Inject(created->parent_uuid, 48, created->gi_id, created->ci_id);
  ASSERT_TRUE(WaitForChanges(1));
  EXPECT_THAT(TaintStrings(*tracker_, spec->name), ElementsAre("gpu.nvidia.com/xid=48:NoSchedule"));
  EXPECT_EQ(StatusOf(*tracker_, spec->name), HealthStatus::kUnhealthy);
  int tainted = 0;
  for (const std::string& d : MonitoredDevices(inventory_)) tainted += !tracker_->Taints(d).empty();
  EXPECT_EQ(tainted, 1);

  clock.Advance(absl::Minutes(5));
  ASSERT_TRUE(WaitForChanges(2));
  EXPECT_THAT(tracker_->Taints(spec->name), IsEmpty());
  EXPECT_EQ(StatusOf(*tracker_, spec->name), HealthStatus::kHealthy);
  monitor_->Stop();
}

// PassthroughSupport: a GPU in the paused set (bound to vfio-pci) is not watched: its XIDs change
// nothing and it is not probed; once it leaves the set its events count again, also for a GPU that
// was paused at Start (registered only then).
TEST_F(MonitorTest, PausedGpuIsSkippedAndWatchedAgainAfterResume) {
  absl::Mutex pmu;
  std::set<std::string> paused;
  DeviceHealthMonitor::Options options;
  options.paused_gpus = [&] {
    absl::MutexLock lock(&pmu);
    return paused;
  };
  // GPU 0 paused from the start, GPU 1 paused later.
  root_ = dir_.path() + "/driver-root";
  std::string gpu0, gpu1;
  {
    ASSERT_TRUE(testing::MakeMockDriverRoot("h100-8x", root_).ok());
    auto nvml = nvml::Nvml::Create(root_);
    ASSERT_TRUE(nvml.ok());
    auto session = (*nvml)->Open();
    ASSERT_TRUE(session.ok());
    gpu0 = *session->DeviceByIndex(0)->Uuid();
    gpu1 = *session->DeviceByIndex(1)->Uuid();
  }
  {
    absl::MutexLock lock(&pmu);
    paused = {gpu0};
  }
  Start("h100-8x", options);
  const std::string name0 = DeviceWithUuid(gpu0), name1 = DeviceWithUuid(gpu1);
  const std::string name2 = DeviceWithUuid(*FindUuid(2));
  {
    absl::MutexLock lock(&pmu);
    paused = {gpu0, gpu1};
  }
  Inject(gpu0, 79);
  Inject(gpu1, 79);
  Inject(*FindUuid(2), 79);  // not paused: the marker that the two before were seen
  ASSERT_TRUE(WaitForChanges(1));
  EXPECT_THAT(tracker_->Taints(name0), IsEmpty());
  EXPECT_THAT(tracker_->Taints(name1), IsEmpty());
  EXPECT_THAT(TaintStrings(*tracker_, name2), ElementsAre("gpu.nvidia.com/xid=79:NoSchedule"));

  {
    absl::MutexLock lock(&pmu);
    paused.clear();
  }
  // The resume is taken at the next round (at most one wait later): inject until it counts.
  for (int i = 0; i < 100 && tracker_->Taints(name0).empty(); ++i) {
    Inject(gpu0, 48);
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(TaintStrings(*tracker_, name0), ElementsAre("gpu.nvidia.com/xid=48:NoSchedule"));
  Inject(gpu1, 48);
  ASSERT_TRUE(WaitForChanges(3));
  EXPECT_THAT(TaintStrings(*tracker_, name1), ElementsAre("gpu.nvidia.com/xid=48:NoSchedule"));
  monitor_->Stop();
}

}  // namespace
}  // namespace dra::gpu
