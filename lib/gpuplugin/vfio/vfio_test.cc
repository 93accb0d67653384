// VFIO discovery (vfio_pci.h) and the bind steps (vfio_bind.h) against a fake host whose sysfs
// files behave like the kernel's (test/doubles/testing/fake_pci_sysfs.h), run by the real step
// engine: success, unprepare, and a failure at each step that must leave the GPU on nvidia.

#include <filesystem>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/atomic_file.h"
#include "lib/driverroot/driver_root.h"
#include "lib/gpuplugin/vfio/vfio_bind.h"
#include "lib/gpuplugin/vfio/vfio_devices.h"
#include "lib/gpuplugin/vfio/vfio_pci.h"
#include "test/doubles/testing/fake_pci_sysfs.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kBus[] = "0000:65:00.0";

TEST(GlobMatch, StarsAndQuestionMarks) {
  EXPECT_TRUE(GlobMatch("pci:v000010DEd*sv*", "pci:v000010DEd00002330sv000010DE"));
  EXPECT_TRUE(GlobMatch("a?c", "abc"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_FALSE(GlobMatch("pci:v000015B3*", "pci:v000010DEd1"));
  EXPECT_FALSE(GlobMatch("abc", "abcd"));
}

TEST(BestVfioModule, FewestWildcardsWinsAndFallsBackToVfioPci) {
  const std::string aliases =
      "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
      "alias vfio_pci:v000010DEd*sv*sd*bc*sc*i* nvidia_vfio_generic\n"
      "alias vfio_pci:v000010DEd00002330sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci\n";
  EXPECT_EQ(BestVfioModule(aliases, "pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00"),
            "nvgrace_gpu_vfio_pci");
  EXPECT_EQ(BestVfioModule(aliases, "pci:v000010DEd00001234sv000010DEsd000016C1bc03sc02i00"),
            "nvidia_vfio_generic");
  EXPECT_EQ(BestVfioModule("", "anything"), "vfio_pci");
  EXPECT_EQ(VfioDriverName("vfio_pci"), "vfio-pci");
}

class VfioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() + "/host";
    ASSERT_TRUE(testing::MakeFakePciHost(root_, {{.bus_id = kBus, .iommu_group = 7},
                                                 {.bus_id = "0000:66:00.0",
                                                  .iommu_group = 8,
                                                  .pci_class = "0x030000",
                                                  .driver = "vfio-pci"}})
                    .ok());
    // Not a GPU: another vendor, and an NVIDIA VF.
    fs::create_directories(root_ + "/sys/bus/pci/devices/0000:01:00.0");
    ASSERT_TRUE(
        WriteFileAtomically(root_ + "/sys/bus/pci/devices/0000:01:00.0/vendor", "0x15b3\n").ok());
    ASSERT_TRUE(
        WriteFileAtomically(root_ + "/sys/bus/pci/devices/0000:01:00.0/class", "0x030200\n").ok());
    ASSERT_TRUE(testing::MakeFakePciHost(tmp_.path() + "/vf", {{.bus_id = "0000:65:00.4"}}).ok());
    fs::rename(tmp_.path() + "/vf/sys/bus/pci/devices/0000:65:00.4",
               root_ + "/sys/bus/pci/devices/0000:65:00.4");
    fs::create_directories(root_ + "/sys/bus/pci/devices/0000:65:00.4/physfn");
    host_ = {.host_root = root_,
             .sysfs = &sysfs_,
             .run = testing::FakeHostCommand(root_),
             .persistence = &persistence_,
             .free_timeout = absl::Seconds(3),
             .free_interval = absl::Seconds(1),
             .sleep = [this](absl::Duration d) { slept_ += d; }};
    AddVfioUndoers(&host_, undoers_);
  }

  // Remembers persistence settings; fails while `fail` is set.
  struct FakePersistence final : GpuPersistence {
    absl::Status Set(const std::string& bus_id, bool enabled) const override {
      if (!fail.ok()) return fail;
      calls.push_back(absl::StrCat(bus_id, enabled ? " on" : " off"));
      return absl::OkStatus();
    }
    mutable std::vector<std::string> calls;
    absl::Status fail;
  };

  // The claim's checkpoint entry, in memory.
  struct Journal final : prepare::StepJournal {
    absl::Status Started(const std::vector<prepare::StepRecord>& s) override {
      steps = s;
      state = "started";
      return absl::OkStatus();
    }
    absl::Status Completed(const std::vector<prepare::StepRecord>& s) override {
      steps = s;
      state = "completed";
      return absl::OkStatus();
    }
    absl::Status Forget() override {
      steps.clear();
      state = "";
      return absl::OkStatus();
    }
    std::vector<prepare::StepRecord> steps;
    std::string state;
  };

  absl::Status Prepare() {
    prepare::PlanSteps steps = VfioBindSteps(
        {.bus_id = kBus, .module = "vfio_pci", .nvidia_device = "/dev/nvidia0"}, &host_);
    prepare::StepEngine engine(&journal_, &undoers_);
    return engine.Run(journal_.steps, steps, Deadline::Infinite());
  }
  absl::Status Unprepare() {
    prepare::StepEngine engine(&journal_, &undoers_);
    absl::Status s = engine.UndoAll(journal_.steps);
    if (s.ok()) s = journal_.Forget();
    return s;
  }
  std::string Driver() { return PciDriver(root_, kBus); }
  std::string Override() {
    return ReadFile(root_ + "/sys/bus/pci/devices/" + std::string(kBus) + "/driver_override")
        .value_or("?");
  }

  dra::testing::TempDir tmp_;
  std::string root_;
  testing::FakeKernelSysfs sysfs_{tmp_.path() + "/host"};
  FakePersistence persistence_;
  VfioHost host_;
  prepare::StepUndoers undoers_;
  Journal journal_;
  absl::Duration slept_;
};

TEST_F(VfioTest, DiscoversGpusWithGroupDriverAndModule) {
  ASSERT_TRUE(
      WriteFileAtomically(root_ + "/lib/modules/6.8.0-test/modules.alias",
                          "alias vfio_pci:v000010DEd00002330sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci\n")
          .ok());
  auto gpus = DiscoverPciGpus(root_, "6.8.0-test");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);  // neither the Mellanox function nor the VF
  EXPECT_EQ((*gpus)[0].bus_id, kBus);
  EXPECT_EQ((*gpus)[0].driver, "nvidia");
  EXPECT_EQ((*gpus)[0].iommu_group, 7);
  EXPECT_EQ((*gpus)[0].numa_node, 0);
  EXPECT_EQ((*gpus)[0].vfio_module, "nvgrace_gpu_vfio_pci");
  EXPECT_EQ((*gpus)[1].driver, "vfio-pci");
  EXPECT_EQ((*gpus)[1].pci_class, "0x030000");
  EXPECT_TRUE(IommuEnabled(root_));
  EXPECT_FALSE(IommufdAvailable(root_));
  EXPECT_FALSE(IommuEnabled(tmp_.path() + "/nowhere"));
}

TEST_F(VfioTest, PrepareBindsToVfioAndUnprepareReturnsTheGpuToNvidia) {
  ASSERT_TRUE(Prepare().ok());
  EXPECT_EQ(journal_.state, "completed");
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_EQ(Override(), "vfio-pci\n");
  EXPECT_TRUE(fs::exists(root_ + "/sys/module/vfio_pci"));  // the fake modprobe ran
  EXPECT_TRUE(fs::exists(root_ + "/dev/vfio/7"));
  EXPECT_THAT(persistence_.calls, ElementsAre("0000:65:00.0 off"));
  // Idempotent: a repeated prepare changes nothing.
  sysfs_.writes.clear();
  ASSERT_TRUE(Prepare().ok());
  EXPECT_THAT(sysfs_.writes, ElementsAre());

  ASSERT_TRUE(Unprepare().ok());
  EXPECT_EQ(Driver(), "nvidia");
  EXPECT_EQ(Override(), "(null)\n");
  EXPECT_FALSE(fs::exists(root_ + "/dev/vfio/7"));
  EXPECT_THAT(persistence_.calls, ElementsAre("0000:65:00.0 off", "0000:65:00.0 on"));
  EXPECT_TRUE(Unprepare().ok());  // nothing recorded any more
}

// One injected failure per step; each must leave the GPU on nvidia, persistence back on when it
// was turned off, nothing recorded, and a later prepare must succeed.
struct Failure {
  std::string name;
  std::function<void(VfioTest*)> inject;
  std::function<void(VfioTest*)> clear;
  std::string message;
};

class VfioFailureTest : public VfioTest, public ::testing::WithParamInterface<int> {
 public:
  using VfioTest::persistence_;
  using VfioTest::root_;
  using VfioTest::sysfs_;
};

std::vector<Failure> Failures() {
  auto touch = [](const std::string& name, const std::string& text) {
    return [=](VfioTest* t) {
      ASSERT_TRUE(
          WriteFileAtomically(static_cast<VfioFailureTest*>(t)->root_ + "/" + name, text).ok());
    };
  };
  auto remove = [](const std::string& name) {
    return [=](VfioTest* t) { fs::remove(static_cast<VfioFailureTest*>(t)->root_ + "/" + name); };
  };
  auto fail_write = [](const std::string& suffix) {
    return [=](VfioTest* t) { static_cast<VfioFailureTest*>(t)->sysfs_.FailWrites(suffix, EIO); };
  };
  auto clear_writes = [](VfioTest* t) { static_cast<VfioFailureTest*>(t)->sysfs_.ClearFailures(); };
  return {
      {"modprobe", touch("modprobe-fails", ""), remove("modprobe-fails"), "modprobe vfio_pci"},
      {"persistence",
       [](VfioTest* t) {
         static_cast<VfioFailureTest*>(t)->persistence_.fail = absl::InternalError("smi broke");
       },
       [](VfioTest* t) { static_cast<VfioFailureTest*>(t)->persistence_.fail = {}; },
       "turn persistence mode off"},
      {"busy", touch("fuser-holders", " 4242 4343\n"), remove("fuser-holders"),
       "timed out waiting for gpu to be free: /dev/nvidia0 is held by PIDs 4242 4343"},
      {"unbind", fail_write("drivers/nvidia/unbind"), clear_writes, "drivers/nvidia/unbind"},
      {"override", fail_write("/driver_override"), clear_writes, "driver_override"},
      {"bind", fail_write("drivers/vfio-pci/bind"), clear_writes, "drivers/vfio-pci/bind"},
  };
}

TEST_P(VfioFailureTest, FailureLeavesTheGpuOnNvidiaAndTheClaimRetriable) {
  const Failure f = Failures()[GetParam()];
  SCOPED_TRACE(f.name);
  f.inject(this);
  absl::Status s = Prepare();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(f.message));
  EXPECT_EQ(Driver(), "nvidia");
  EXPECT_TRUE(journal_.steps.empty()) << "state " << journal_.state;
  EXPECT_FALSE(fs::exists(root_ + "/dev/vfio/7"));
  if (!persistence_.calls.empty()) {
    EXPECT_EQ(persistence_.calls.back(), "0000:65:00.0 on");
  }
  EXPECT_EQ(Override(), "(null)\n");
  f.clear(this);
  ASSERT_TRUE(Prepare().ok());
  EXPECT_EQ(Driver(), "vfio-pci");
}

INSTANTIATE_TEST_SUITE_P(EachStep, VfioFailureTest, ::testing::Range(0, 6),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return Failures()[info.param].name;
                         });

TEST_F(VfioTest, BusyGpuWaitsBoundedTime) {
  ASSERT_TRUE(WriteFileAtomically(root_ + "/fuser-holders", "4242\n").ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(Prepare()));
  EXPECT_GE(slept_, absl::Seconds(2));
  EXPECT_LE(slept_, absl::Seconds(3));
}

// A kernel whose bind and unbind writes show in the driver link only `late_by` polls later (the
// test's sleep ticks it), or never for a file ending in `dropped`, as a fake kernel answering
// from another process does.
struct LateSysfs final : SysfsWriter {
  absl::Status Write(const std::string& path, absl::string_view value) const override {
    if (!absl::EndsWith(path, "/bind") && !absl::EndsWith(path, "/unbind")) {
      return kernel->Write(path, value);
    }
    if (!dropped.empty() && absl::EndsWith(path, dropped)) return absl::OkStatus();
    pending.push_back({path, std::string(value), late_by});
    Tick(0);
    return absl::OkStatus();
  }
  // One poll went by: applies the writes whose time has come.
  void Tick(int polls) const {
    for (auto it = pending.begin(); it != pending.end();) {
      it->left -= polls;
      if (it->left > 0) {
        ++it;
        continue;
      }
      EXPECT_TRUE(kernel->Write(it->path, it->value).ok()) << it->path;
      it = pending.erase(it);
    }
  }
  struct Pending {
    std::string path, value;
    int left;
  };
  const SysfsWriter* kernel = nullptr;
  int late_by = 0;
  std::string dropped;
  mutable std::vector<Pending> pending;
};

TEST_F(VfioTest, BindAndUnbindThatShowLateAreWaitedFor) {
  LateSysfs late;
  late.kernel = &sysfs_;
  late.late_by = 3;
  host_.sysfs = &late;
  host_.sleep = [&](absl::Duration d) {
    slept_ += d;
    late.Tick(1);
  };
  ASSERT_TRUE(Prepare().ok());
  EXPECT_EQ(Driver(), "vfio-pci");
  EXPECT_EQ(slept_, absl::Milliseconds(60));  // 3 polls after the unbind, 3 after the bind
  ASSERT_TRUE(Unprepare().ok());
  EXPECT_EQ(Driver(), "nvidia");
  EXPECT_EQ(slept_, absl::Milliseconds(120));
  EXPECT_THAT(persistence_.calls, ElementsAre("0000:65:00.0 off", "0000:65:00.0 on"));
}

TEST_F(VfioTest, BindThatNeverShowsFailsTheStepAndIsUndone) {
  LateSysfs late;
  late.kernel = &sysfs_;
  late.dropped = "drivers/vfio-pci/bind";
  host_.sysfs = &late;
  host_.sleep = [&](absl::Duration d) {
    slept_ += d;
    late.Tick(1);
  };
  absl::Status s = Prepare();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("GPU \"0000:65:00.0\" has no driver 2s after \"0000:65:00.0\" "
                                     "was written to ",
                                     root_,
                                     "/sys/bus/pci/drivers/vfio-pci/bind; expected driver "
                                     "\"vfio-pci\"")));
  EXPECT_EQ(slept_, absl::Seconds(2));
  // Undone: back on nvidia, persistence on, nothing recorded; the retry succeeds.
  EXPECT_EQ(Driver(), "nvidia");
  EXPECT_EQ(Override(), "(null)\n");
  EXPECT_THAT(persistence_.calls, ElementsAre("0000:65:00.0 off", "0000:65:00.0 on"));
  EXPECT_TRUE(journal_.steps.empty()) << journal_.state;
  late.dropped.clear();
  ASSERT_TRUE(Prepare().ok());
  EXPECT_EQ(Driver(), "vfio-pci");
}

TEST_F(VfioTest, UnbindThatNeverShowsNamesTheDriverFound) {
  LateSysfs late;
  late.kernel = &sysfs_;
  late.dropped = "drivers/nvidia/unbind";
  host_.sysfs = &late;
  absl::Status s = Prepare();
  EXPECT_THAT(s.message(), HasSubstr("GPU \"0000:65:00.0\" has driver \"nvidia\" 2s after"));
  EXPECT_THAT(s.message(), HasSubstr("drivers/nvidia/unbind; expected no driver"));
  EXPECT_EQ(Driver(), "nvidia");
  EXPECT_THAT(persistence_.calls, ElementsAre("0000:65:00.0 off", "0000:65:00.0 on"));
}

TEST_F(VfioTest, GpuOnAnotherDriverIsRefusedWithoutChange) {
  fs::create_directories(root_ + "/sys/bus/pci/drivers/nouveau");
  fs::remove(root_ + "/sys/bus/pci/devices/" + std::string(kBus) + "/driver");
  fs::create_directory_symlink(root_ + "/sys/bus/pci/drivers/nouveau",
                               root_ + "/sys/bus/pci/devices/" + std::string(kBus) + "/driver");
  absl::Status s = Prepare();
  EXPECT_THAT(s.message(), HasSubstr("GPU \"0000:65:00.0\" is bound to \"nouveau\" driver, "
                                     "expected \"nvidia\" or \"vfio-pci\""));
  EXPECT_EQ(Driver(), "nouveau");
}

TEST_F(VfioTest, PhysicalFunctionWithVfsIsNotUnbound) {
  ASSERT_TRUE(WriteFileAtomically(
                  root_ + "/sys/bus/pci/devices/" + std::string(kBus) + "/sriov_numvfs", "4\n")
                  .ok());
  absl::Status s = Prepare();
  EXPECT_THAT(s.message(), HasSubstr("gpu has 4 VFs, cannot unbind"));
  EXPECT_EQ(Driver(), "nvidia");
}

TEST_F(VfioTest, CrashAfterUnbindIsUndoneFromTheRecordAlone) {
  // What a plugin that died right after the unbind left: the GPU unbound, the steps up to
  // vfioUnbind recorded as begun.
  ASSERT_TRUE(sysfs_.Write(root_ + "/sys/bus/pci/drivers/nvidia/unbind", kBus).ok());
  const nlohmann::json undo = {
      {"busId", kBus}, {"module", "vfio_pci"}, {"nvidiaDevice", "/dev/nvidia0"}};
  journal_.steps = {{kVfioModuleStep, prepare::StepState::kApplied, undo},
                    {kVfioPersistenceStep, prepare::StepState::kApplied, undo},
                    {kVfioUnbindStep, prepare::StepState::kBegun, undo}};
  ASSERT_EQ(Driver(), "");
  ASSERT_TRUE(Unprepare().ok());
  EXPECT_EQ(Driver(), "nvidia");
  EXPECT_THAT(persistence_.calls, ElementsAre("0000:65:00.0 on"));
}

TEST_F(VfioTest, UndoRejectsARecordThatNamesAPath) {
  const nlohmann::json undo = {
      {"busId", "../../x"}, {"module", "vfio_pci"}, {"nvidiaDevice", "/dev/nvidia0"}};
  EXPECT_TRUE(absl::IsInvalidArgument(undoers_.at(kVfioUnbindStep)(undo)));
  EXPECT_TRUE(absl::IsInvalidArgument(undoers_.at(kVfioBindStep)(nlohmann::json::object())));
}

TEST(VfioDevices, Uuid5IsTheRfc4122NameBasedUuid) {
  // RFC 4122 / Python uuid.uuid5(uuid.NAMESPACE_DNS, "python.org").
  EXPECT_EQ(Uuid5Dns("python.org"), "886313e1-3b8a-5372-9b90-0c9aee199e5d");
  EXPECT_NE(Uuid5Dns("0000:65:00.0"), Uuid5Dns("0000:66:00.0"));
}

TEST(VfioDevices, AddressableMemorySumsThe64BitMemoryBars) {
  // BAR0 16 MiB 32-bit, BAR1 64 GiB 64-bit prefetchable, BAR3 32 MiB 64-bit, an I/O BAR.
  const std::string resource =
      "0x00000000d0000000 0x00000000d0ffffff 0x0000000000040200\n"
      "0x0000380000000000 0x0000380fffffffff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x0000381000000000 0x0000381001ffffff 0x000000000014220c\n"
      "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
      "0x000000000000e000 0x000000000000e07f 0x0000000000040101\n"
      "0x0000390000000000 0x0000390fffffffff 0x000000000014220c\n";  // 7th: not a BAR
  EXPECT_EQ(AddressableMemory(resource), uint64_t{128} << 30);       // 64 GiB + 32 MiB -> 128 GiB
  EXPECT_EQ(AddressableMemory(""), 0u);
}

TEST(VfioDevices, ProductNameFromPciIds) {
  const std::string ids =
      "# comment\n10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n"
      "\t\t10de 16c1  H100 SXM5 80GB\n10df  Emulex\n\t2330  Not this one\n";
  EXPECT_EQ(PciIdsDeviceName(ids, "10de", "2330"), "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(PciIdsDeviceName(ids, "10de", "2331"), "");
}

TEST_F(VfioTest, DevicesAreNamedByPositionWithTheirAttributes) {
  ASSERT_TRUE(MakeDirectories(root_ + "/usr/share/misc").ok());
  ASSERT_TRUE(WriteFileAtomically(root_ + "/usr/share/misc/pci.ids",
                                  "10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(root_ + "/dev/iommu", "").ok());
  auto gpus = DiscoverPciGpus(root_, "6.8.0-test");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  auto devices = VfioDevices(*gpus, root_);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  const AllocatableDevice& d = (*devices)[0].device;
  EXPECT_EQ(d.name, "gpu-vfio-0");
  EXPECT_EQ((*devices)[1].device.name, "gpu-vfio-1");
  EXPECT_EQ(d.type, DeviceType::kVfio);
  EXPECT_EQ((*devices)[0].pci.iommu_group, 7);
  auto attr = [&](const std::string& key) {
    auto it = d.published.attributes.find(key);
    return it == d.published.attributes.end() ? std::string("<none>")
                                              : it->second.string_value.value_or("<not string>");
  };
  EXPECT_EQ(attr("type"), "vfio");
  EXPECT_EQ(attr("uuid"), Uuid5Dns(kBus));
  EXPECT_EQ(attr("deviceID"), "0x2330");
  EXPECT_EQ(attr("vendorID"), "0x10de");
  EXPECT_EQ(attr("productName"), "GH100 [H100 SXM5 80GB]");
  EXPECT_EQ(attr("resource.kubernetes.io/pciBusID"), kBus);
  EXPECT_EQ(d.published.attributes.at("iommuFDEnabled").bool_value, true);
  EXPECT_EQ(d.published.attributes.at("resource.kubernetes.io/numaNode").int_value, 0);
  EXPECT_TRUE(CheckDeviceLimits(d.published).ok());
}

TEST(SmiPersistence, SetsTheModeThroughTheDriverRootsNvidiaSmi) {
  dra::testing::TempDir tmp;
  const std::string root_path = tmp.path() + "/root";
  ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", root_path).ok());
  auto root = driverroot::DriverRoot::Create(
      {.root = root_path, .host_root = "/", .proc_root = root_path + "/proc"});
  ASSERT_TRUE(root.ok()) << root.status();
  NvidiaSmi smi(root->get());
  std::unique_ptr<GpuPersistence> persistence = SmiPersistence(&smi);
  auto mode = [&]() -> std::string {
    auto q = smi.Run({"-q", "-i", "0000:18:00.0"});
    EXPECT_TRUE(q.ok()) << q.status();
    std::smatch m;
    const std::string text = q.value_or("");
    if (!std::regex_search(text, m, std::regex("Persistence Mode +: (\\w+)"))) return "?";
    return m[1].str() == "Enabled" ? "on" : "off";
  };
  ASSERT_TRUE(persistence->Set("0000:18:00.0", true).ok());
  EXPECT_EQ(mode(), "on");
  ASSERT_TRUE(persistence->Set("0000:18:00.0", false).ok());
  EXPECT_EQ(mode(), "off");
  EXPECT_FALSE(persistence->Set("0000:99:00.0", false).ok());
}

TEST(KernelSysfsWriter, WritesTheValueAndNamesTheFileOnError) {
  dra::testing::TempDir tmp;
  const std::string file = tmp.path() + "/driver_override";
  ASSERT_TRUE(WriteFileAtomically(file, "").ok());
  ASSERT_TRUE(KernelSysfsWriter().Write(file, "vfio-pci").ok());
  EXPECT_EQ(ReadFile(file).value_or(""), "vfio-pci");
  absl::Status s = KernelSysfsWriter().Write(tmp.path() + "/missing/bind", "0000:65:00.0");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr(tmp.path() + "/missing/bind"));
}

}  // namespace
}  // namespace dra::gpu
