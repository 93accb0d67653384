// Prepare/unprepare against a mock driver root: inventory from the mock NVML, a real checkpoint
// and real CDI spec files in a temp dir.

#include "lib/gpu/device_state.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/common/atomic_file.h"
#include "lib/gpu/mps_sharing.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// MPS daemons that record what prepare and unprepare ask of them.
class FakeMpsDaemons final : public MpsDaemons {
 public:
  class Daemon final : public MpsDaemon {
   public:
    Daemon(const FakeMpsDaemons* owner, MpsDaemonGroup group)
        : owner_(owner), group_(std::move(group)) {}
    MpsDaemonRecord Record() const override {
      return {.id = MpsDaemonId(group_.claim_uid, group_.device_uuids),
              .ns = "mps-ns",
              .full_gpu_uuids = group_.full_gpu_uuids};
    }
    absl::Status Start() override {
      owner_->calls.push_back("start " + Record().id);
      if (owner_->on_start) owner_->on_start();
      return owner_->start_status;
    }
    absl::Status AssertReady(absl::Time deadline) override {
      owner_->calls.push_back("ready " + Record().id);
      owner_->deadlines.push_back(deadline);
      return owner_->ready_status;
    }
    cdi::ContainerEdits ContainerEdits() const override {
      cdi::ContainerEdits e;
      e.env.push_back("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps");
      e.mounts.push_back({.host_path = "/data/mps/" + Record().id + "/pipe",
                          .container_path = "/tmp/nvidia-mps",
                          .options = {"rw", "bind"}});
      return e;
    }

   private:
    const FakeMpsDaemons* const owner_;
    const MpsDaemonGroup group_;
  };

  absl::StatusOr<std::unique_ptr<MpsDaemon>> Create(MpsDaemonGroup group) const override {
    groups.push_back(group);
    return std::unique_ptr<MpsDaemon>(new Daemon(this, std::move(group)));
  }
  absl::Status Stop(const MpsDaemonRecord& record) const override {
    calls.push_back("stop " + record.id);
    return stop_status;
  }

  mutable std::vector<MpsDaemonGroup> groups;
  mutable std::vector<std::string> calls;
  mutable std::vector<absl::Time> deadlines;
  std::function<void()> on_start;
  absl::Status start_status, ready_status, stop_status;
};

class DeviceStateTest : public ::testing::Test {
 protected:
  // May be called again in a test: starts over with a fresh root, checkpoint and gates.
  void Init(const std::string& profile) {
    state_.reset();
    checkpoint_.reset();
    for (const char* dir : {"/root", "/plugin", "/cdi"}) {
      std::filesystem::remove_all(tmp_.path() + dir);
    }
    root_path_ = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot(profile, root_path_).ok());
    auto root = driverroot::DriverRoot::Create(
        {.root = root_path_, .host_root = "/host-driver", .proc_root = root_path_ + "/proc"});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
    auto nvml = nvml::Nvml::Create(root_path_);
    ASSERT_TRUE(nvml.ok()) << nvml.status();
    nvml_ = std::move(*nvml);
    auto session = nvml_->Open();
    ASSERT_TRUE(session.ok()) << session.status();
    auto inventory = Discover(*session, {.sysfs_root = tmp_.path() + "/sys"});
    ASSERT_TRUE(inventory.ok()) << inventory.status();
    inventory_ = *inventory;
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-1\n").ok());
    auto cdi = ClaimCdi::Create(root_.get(), tmp_.path() + "/cdi", inventory_.driver_version);
    ASSERT_TRUE(cdi.ok()) << cdi.status();
    cdi_ = std::move(*cdi);
    gates_ = std::make_unique<FeatureGates>();
    ASSERT_TRUE(api::RegisterDriverFeatureGates(*gates_).ok());
    shares_ = {};
    mps_ = std::make_unique<FakeMpsDaemons>();
    smi_ = std::make_unique<NvidiaSmi>(root_.get());
    time_slicing_ = std::make_unique<TimeSlicing>(smi_.get());
    Reopen();
  }
  // A fresh checkpoint handle and DeviceState over the same files, as after a plugin restart.
  void Reopen() {
    state_.reset();
    auto cp = checkpoint::Checkpoint::Open(tmp_.path() + "/plugin", tmp_.path() + "/boot_id");
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = std::move(*cp);
    state_ = std::make_unique<DeviceState>(inventory_, cdi_.get(), checkpoint_.get(),
                                           DeviceState::Options{.pool_name = "node1",
                                                                .gates = gates_.get(),
                                                                .consumable_shares = shares_,
                                                                .time_slicing = time_slicing_.get(),
                                                                .mps = mps_.get(),
                                                                .clock = &clock_});
  }
  // Turns gates on ("TimeSlicingSettings=true,...") and consumable shares ("disabled", "memory",
  // ...), then reopens.
  void Configure(const std::string& gates, const std::string& shares = "disabled") {
    ASSERT_TRUE(gates_->Set(gates).ok());
    auto parsed = api::ParseConsumableShares(shares, *gates_);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    shares_ = *parsed;
    Reopen();
  }
  k8s::ResourceClaim Claim(const std::string& uid, const std::vector<std::string>& devices,
                           nlohmann::json config = nlohmann::json::array()) {
    nlohmann::json results = nlohmann::json::array();
    for (const std::string& d : devices) {
      results.push_back(
          {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", d}});
    }
    nlohmann::json j = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceClaim"},
        {"metadata", {{"name", "claim-" + uid}, {"namespace", "ns"}, {"uid", uid}}},
        {"spec",
         {{"devices",
           {{"requests",
             {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}}}}}},
        {"status", {{"allocation", {{"devices", {{"results", results}, {"config", config}}}}}}}};
    auto claim = k8s::ResourceClaim::FromJson(j);
    EXPECT_TRUE(claim.ok()) << claim.status();
    return *claim;
  }
  std::string SpecPath(const std::string& uid) { return cdi_->PathFor(uid); }
  std::string Uuid(const std::string& device) { return inventory_.Find(device)->gpu.uuid; }
  // "<compute mode>/<time-slice>" of a GPU as the fake nvidia-smi reports it (`-q`), i.e. the
  // state the mock NVML persisted in the driver root.
  std::string GpuSetting(const std::string& device) {
    auto q = smi_->Run({"-q", "-i", Uuid(device)});
    EXPECT_TRUE(q.ok()) << q.status();
    std::string text = q.value_or("");
    std::smatch mode, slice;
    std::regex_search(text, mode, std::regex("Compute Mode +: (\\S+)"));
    std::regex_search(text, slice, std::regex("Compute Timeslice +: (\\S+)"));
    return (mode.size() > 1 ? mode[1].str() : "?") + "/" +
           (slice.size() > 1 ? slice[1].str() : "?");
  }
  void SetGpu(const std::string& device, const std::string& mode, int timeslice) {
    ASSERT_TRUE(smi_->Run({"-i", Uuid(device), "-c", mode}).ok());
    ASSERT_TRUE(smi_->Run({"compute-policy", "-i", Uuid(device), "--set-timeslice",
                           std::to_string(timeslice)})
                    .ok());
  }
  std::optional<checkpoint::ClaimState> StateOf(const std::string& uid) {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok() || !c->has_value()) return std::nullopt;
    return (*c)->state;
  }
  // Replaces the driver root's nvidia-smi with a script: `body` runs first; "exec real" goes on
  // to the real one (kept as nvidia-smi.real). Restore() puts the real one back.
  void WrapNvidiaSmi(const std::string& body) {
    const std::string smi = root_path_ + "/usr/bin/nvidia-smi";
    if (!std::filesystem::exists(smi + ".real")) std::filesystem::rename(smi, smi + ".real");
    std::ofstream(smi) << "#!/bin/sh\n" << body << "\n";
    ::chmod(smi.c_str(), 0755);
  }
  void RestoreNvidiaSmi() {
    const std::string smi = root_path_ + "/usr/bin/nvidia-smi";
    std::filesystem::rename(smi + ".real", smi);
  }

  dra::testing::TempDir tmp_;
  std::string root_path_;
  std::unique_ptr<driverroot::DriverRoot> root_;
  std::unique_ptr<nvml::Nvml> nvml_;
  Inventory inventory_;
  std::unique_ptr<FeatureGates> gates_;
  api::ConsumableShares shares_;
  std::unique_ptr<NvidiaSmi> smi_;
  std::unique_ptr<TimeSlicing> time_slicing_;
  std::unique_ptr<FakeMpsDaemons> mps_;
  FakeClock clock_;
  std::unique_ptr<ClaimCdi> cdi_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  std::unique_ptr<DeviceState> state_;
};

TEST_F(DeviceStateTest, PrepareWritesCdiSpecAndCheckpointIdempotently) {
  Init("h100-8x");
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-3"}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].device, "gpu-3");
  EXPECT_THAT((*devices)[0].cdi_device_ids,
              ::testing::ElementsAre("k8s.gpu.nvidia.com/claim=uid-1-gpu-3"));
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(*spec, HasSubstr("\"kind\": \"k8s.gpu.nvidia.com/claim\""));
  EXPECT_THAT(*spec, HasSubstr("\"name\": \"uid-1-gpu-3\""));
  EXPECT_THAT(*spec, HasSubstr("\"path\": \"/dev/nvidia3\""));
  EXPECT_THAT(*spec, HasSubstr("/dev/nvidiactl"));
  // Host paths are rewritten from the plugin's view of the driver root to the host's.
  EXPECT_THAT(*spec, HasSubstr("/host-driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so"));
  EXPECT_THAT(*spec, ::testing::Not(HasSubstr(root_path_)));

  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->state, checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ((*stored)->name, "claim-uid-1");

  auto again = state_->Prepare(Claim("uid-1", {"gpu-3"}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *devices);
}

TEST_F(DeviceStateTest, DeviceHeldByAnotherClaimIsRefused) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  auto other = state_->Prepare(Claim("uid-2", {"gpu-1", "gpu-0"}));
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("requested device gpu-0 is already allocated to different claim uid-1"));
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-2")));
  auto none = checkpoint_->Get("uid-2");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(DeviceStateTest, UnprepareWorksFromTheCheckpointAloneAfterARestart) {
  Init("h100-8x");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"})).ok());
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
  auto gone = checkpoint_->Get("uid-1");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  EXPECT_TRUE(state_->Unprepare("uid-1").ok());       // idempotent
  EXPECT_TRUE(state_->Unprepare("never-seen").ok());  // unknown claim
  // The device is free again.
  EXPECT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-0"})).ok());
}

TEST_F(DeviceStateTest, StaticMigDeviceGetsParentAndCapabilityNodes) {
  Init("a100-mig-4x");
  const AllocatableDevice* mig = nullptr;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig) {
      mig = &d;
      break;
    }
  }
  ASSERT_NE(mig, nullptr);
  auto devices = state_->Prepare(Claim("uid-m", {mig->name}));
  ASSERT_TRUE(devices.ok()) << devices.status();
  auto spec = ReadFile(SpecPath("uid-m"));
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(*spec, HasSubstr(absl::StrCat("\"path\": \"/dev/nvidia", mig->gpu.minor, "\"")));
  EXPECT_THAT(*spec, HasSubstr("/dev/nvidia-caps/nvidia-cap"));
  EXPECT_EQ((*devices)[0].uuid, mig->mig->uuid);
}

TEST_F(DeviceStateTest, BadOpaqueConfigIsAPermanentErrorAndChangesNothing) {
  Init("h100-8x");
  nlohmann::json config =
      nlohmann::json::array({{{"source", "FromClaim"},
                              {"requests", nlohmann::json::array()},
                              {"opaque",
                               {{"driver", "gpu.nvidia.com"},
                                {"parameters",
                                 {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                  {"kind", "GpuConfig"},
                                  {"sharing", {{"strategy", "TimeSlicing"}, {"bogus", 1}}}}}}}}});
  auto r = state_->Prepare(Claim("uid-bad", {"gpu-0"}, config));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bogus"));
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-bad")));
}

TEST_F(DeviceStateTest, UnknownDeviceAndForeignPoolAreErrors) {
  Init("t4-2x");
  auto r = state_->Prepare(Claim("uid-x", {"gpu-7"}));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("allocatable not found for device \"gpu-7\""));
}

// A claim config entry: GpuConfig with the given sharing (null: none), for all requests.
nlohmann::json GpuConfigEntry(nlohmann::json sharing) {
  nlohmann::json params = {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "GpuConfig"}};
  if (!sharing.is_null()) params["sharing"] = sharing;
  return nlohmann::json::array(
      {{{"source", "FromClaim"},
        {"requests", nlohmann::json::array()},
        {"opaque", {{"driver", "gpu.nvidia.com"}, {"parameters", params}}}}});
}
nlohmann::json TimeSliced(const std::string& interval) {
  return GpuConfigEntry(
      {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}});
}

TEST_F(DeviceStateTest, TimeSlicingSetsEachIntervalAndUnprepareResets) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  for (const char* interval : {"Default", "Short", "Medium", "Long"}) {
    SCOPED_TRACE(interval);
    SetGpu("gpu-2", "EXCLUSIVE_PROCESS", 1);  // whatever was there before
    const std::string uid = std::string("uid-") + interval;
    auto devices = state_->Prepare(Claim(uid, {"gpu-2", "gpu-5"}, TimeSliced(interval)));
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_EQ(GpuSetting("gpu-2"), std::string("Default/") + interval);
    EXPECT_EQ(GpuSetting("gpu-5"), std::string("Default/") + interval);
    EXPECT_EQ(GpuSetting("gpu-3"), "Default/Default");  // not in the claim
    auto stored = checkpoint_->Get(uid);
    ASSERT_TRUE(stored.ok() && stored->has_value());
    EXPECT_EQ((*stored)->state, checkpoint::ClaimState::kPrepareCompleted);
    EXPECT_EQ((*stored)->prepared_devices[0]["timeSliceApplied"], true);

    ASSERT_TRUE(state_->Unprepare(uid).ok());
    EXPECT_EQ(GpuSetting("gpu-2"), "Default/Default");
    EXPECT_EQ(GpuSetting("gpu-5"), "Default/Default");
  }
}

TEST_F(DeviceStateTest, TimeSlicingWithoutIntervalUsesDefault) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  SetGpu("gpu-1", "DEFAULT", 3);
  ASSERT_TRUE(
      state_->Prepare(Claim("uid-1", {"gpu-1"}, GpuConfigEntry({{"strategy", "TimeSlicing"}})))
          .ok());
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Default");
}

TEST_F(DeviceStateTest, TimeSlicingNeedsTheGate) {
  Init("h100-8x");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-1"}, TimeSliced("Long")));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("TimeSlicingSettings"));
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Default");
}

TEST_F(DeviceStateTest, IdempotentPrepareDoesNotRunNvidiaSmiAgain) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"}, TimeSliced("Long"))).ok());
  // If the second prepare ran nvidia-smi, it would fail.
  WrapNvidiaSmi("echo should not run >&2; exit 1");
  auto again = state_->Prepare(Claim("uid-1", {"gpu-0"}, TimeSliced("Long")));
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(DeviceStateTest, PlainGpuClaimDoesNotTouchTheTimeSlice) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  WrapNvidiaSmi("echo should not run >&2; exit 1");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->prepared_devices[0]["timeSliceApplied"], false);
  EXPECT_TRUE(state_->Unprepare("uid-1").ok());
}

TEST_F(DeviceStateTest, FailingNvidiaSmiLeavesClaimStartedAndRetryWorks) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  WrapNvidiaSmi("echo 'Unable to set: GPU is busy' >&2; exit 15");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-4"}, TimeSliced("Medium")));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(api::IsPermanentConfigError(r.status())) << r.status();
  const std::string msg(r.status().message());
  EXPECT_THAT(msg, HasSubstr("nvidia-smi -i " + Uuid("gpu-4") + " -c DEFAULT"));
  EXPECT_THAT(msg, HasSubstr("exit code 15: Unable to set: GPU is busy"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));

  RestoreNvidiaSmi();
  Reopen();  // as after a plugin restart
  auto retry = state_->Prepare(Claim("uid-1", {"gpu-4"}, TimeSliced("Medium")));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_EQ(GpuSetting("gpu-4"), "Default/Medium");
  EXPECT_TRUE(std::filesystem::exists(SpecPath("uid-1")));
}

// A prepare that set the first GPU and failed on the second is undone by the unprepare the
// cleanup runs once the claim is gone.
TEST_F(DeviceStateTest, UnprepareOfPartiallyPreparedClaimResetsWhatWasSet) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  const std::string real = root_path_ + "/usr/bin/nvidia-smi.real";
  WrapNvidiaSmi("case \"$*\" in *" + Uuid("gpu-6") + "*) echo broken >&2; exit 3;; esac\nexec " +
                real + " \"$@\"");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-5", "gpu-6"}, TimeSliced("Long")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(GpuSetting("gpu-5"), "Default/Long");
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  RestoreNvidiaSmi();
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-5"), "Default/Default");
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

// Records written before time-slicing existed have no timeSliceApplied: with the gate on,
// unprepare resets their GPUs (the Go driver's rule); with it off, they are left alone.
TEST_F(DeviceStateTest, LegacyRecordWithoutFlagResetsWhileGateOn) {
  for (bool gate : {true, false}) {
    SCOPED_TRACE(gate);
    Init("h100-8x");
    if (gate) Configure("TimeSlicingSettings=true");
    ASSERT_TRUE(state_->Prepare(Claim("uid-old", {"gpu-7"})).ok());
    ASSERT_TRUE(checkpoint_
                    ->Update([](checkpoint::ClaimMap& claims) {
                      for (nlohmann::json& d : claims["uid-old"].prepared_devices) {
                        d.erase("timeSliceApplied");
                      }
                      return absl::OkStatus();
                    })
                    .ok());
    SetGpu("gpu-7", "DEFAULT", 3);
    ASSERT_TRUE(state_->Unprepare("uid-old").ok());
    EXPECT_EQ(GpuSetting("gpu-7"), gate ? "Default/Default" : "Default/Long");
  }
}

TEST_F(DeviceStateTest, ConsumableSharesAllowEqualConfigsAndResetAfterTheLastClaim) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true,ConsumableShares=true", "memory");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-3"}, TimeSliced("Long"))).ok());
  auto second = state_->Prepare(Claim("uid-2", {"gpu-3", "gpu-4"}, TimeSliced("Long")));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Long");

  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Long");  // uid-2 still uses it
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_EQ(GpuSetting("gpu-3"), "Default/Default");
  EXPECT_EQ(GpuSetting("gpu-4"), "Default/Default");
}

TEST_F(DeviceStateTest, ConsumableSharesOverlapNeedsEqualConfigs) {
  struct Case {
    std::string name;
    nlohmann::json first, second;
    bool ok;
  };
  const Case cases[] = {
      {"both plain", nlohmann::json::array(), nlohmann::json::array(), true},
      {"explicit empty GpuConfig equals the default", nlohmann::json::array(),
       GpuConfigEntry(nullptr), true},
      {"same interval", TimeSliced("Short"), TimeSliced("Short"), true},
      {"omitted interval normalizes to Default", GpuConfigEntry({{"strategy", "TimeSlicing"}}),
       TimeSliced("Default"), true},
      {"other interval", TimeSliced("Short"), TimeSliced("Long"), false},
      {"plain vs time-sliced", nlohmann::json::array(), TimeSliced("Long"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Init("h100-8x");
    Configure("TimeSlicingSettings=true,ConsumableShares=true", "unlimited");
    ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"}, c.first)).ok());
    auto r = state_->Prepare(Claim("uid-2", {"gpu-0"}, c.second));
    if (c.ok) {
      EXPECT_TRUE(r.ok()) << r.status();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_THAT(std::string(r.status().message()),
                  HasSubstr("requested device gpu-0 has conflicting configuration with already "
                            "prepared claim uid-1"));
      EXPECT_FALSE(api::IsPermanentConfigError(r.status()));
      EXPECT_EQ(StateOf("uid-2"), std::nullopt);
    }
  }
}

TEST_F(DeviceStateTest, WithoutConsumableSharesTimeSlicedGpuIsStillExclusive) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"}, TimeSliced("Long"))).ok());
  auto r = state_->Prepare(Claim("uid-2", {"gpu-0"}, TimeSliced("Long")));
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("requested device gpu-0 is already allocated to different claim uid-1"));
}

// With consumable shares the scheduler may give two requests of one claim the same device.
TEST_F(DeviceStateTest, TwoRequestsOnOneSharedDeviceGiveOneCdiDevice) {
  Init("h100-8x");
  Configure("TimeSlicingSettings=true,ConsumableShares=true", "unlimited");
  k8s::ResourceClaim claim = Claim("uid-1", {"gpu-1", "gpu-1"}, TimeSliced("Short"));
  claim.status.allocation->devices.results[1].request = "other";
  auto devices = state_->Prepare(claim);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].cdi_device_ids, (*devices)[1].cdi_device_ids);
  EXPECT_THAT((*devices)[1].requests, ::testing::ElementsAre("other"));
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto j = nlohmann::json::parse(*spec);
  EXPECT_EQ(j["devices"].size(), 1u) << *spec;
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Short");
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(GpuSetting("gpu-1"), "Default/Default");
}

TEST_F(DeviceStateTest, MpsIsRejectedWithConsumableShares) {
  Init("h100-8x");
  Configure("MPSSupport=true,ConsumableShares=true", "4");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, GpuConfigEntry({{"strategy", "MPS"}})));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("MPS sharing is not supported when consumable shares is enabled"));
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

// A claim config entry: `kind` with MPS sharing and these mpsConfig fields, for all requests.
nlohmann::json MpsEntry(nlohmann::json mps_config, const std::string& kind = "GpuConfig") {
  nlohmann::json sharing = {{"strategy", "MPS"}};
  if (!mps_config.is_null()) sharing["mpsConfig"] = mps_config;
  return nlohmann::json::array({{{"source", "FromClaim"},
                                 {"requests", nlohmann::json::array()},
                                 {"opaque",
                                  {{"driver", "gpu.nvidia.com"},
                                   {"parameters",
                                    {{"apiVersion", "resource.nvidia.com/v1beta1"},
                                     {"kind", kind},
                                     {"sharing", sharing}}}}}}});
}

TEST_F(DeviceStateTest, MpsRecordsTheDaemonBeforeStartWaitsAndAddsCdiEdits) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-2"), Uuid("gpu-5")});
  std::optional<checkpoint::PreparedClaim> at_start;
  mps_->on_start = [&] {
    auto c = checkpoint_->Get("uid-1");
    ASSERT_TRUE(c.ok()) << c.status();
    at_start = *c;
  };
  const absl::Time begin = clock_.Now();
  auto devices = state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-5"},
                                       MpsEntry({{"defaultActiveThreadPercentage", 50},
                                                 {"defaultPinnedDeviceMemoryLimit", "10Gi"}})));
  ASSERT_TRUE(devices.ok()) << devices.status();

  ASSERT_EQ(mps_->groups.size(), 1u);
  const MpsDaemonGroup& g = mps_->groups[0];
  EXPECT_EQ(g.claim_uid, "uid-1");
  EXPECT_THAT(g.device_uuids, ElementsAre(Uuid("gpu-2"), Uuid("gpu-5")));
  EXPECT_THAT(g.full_gpu_uuids, ElementsAre(Uuid("gpu-2"), Uuid("gpu-5")));
  EXPECT_EQ(g.config.default_active_thread_percentage, 50);
  EXPECT_EQ(g.pinned_memory_limits_mib,
            (std::map<std::string, int64_t>{{Uuid("gpu-2"), 10240}, {Uuid("gpu-5"), 10240}}));
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id));
  ASSERT_EQ(mps_->deadlines.size(), 1u);
  EXPECT_EQ(mps_->deadlines[0], begin + absl::Seconds(30));

  // Before the daemon started, the checkpoint already named it.
  ASSERT_TRUE(at_start.has_value());
  EXPECT_EQ(at_start->state, checkpoint::ClaimState::kPrepareStarted);
  EXPECT_EQ(at_start->prepared_devices[0]["mpsDaemon"]["id"], id);
  EXPECT_EQ(at_start->prepared_devices[1]["mpsDaemon"]["fullGpuUUIDs"],
            nlohmann::json({Uuid("gpu-2"), Uuid("gpu-5")}));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].mps_daemon->id, id);

  // Both CDI devices carry the daemon's edits.
  auto spec = ReadFile(SpecPath("uid-1"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto j = nlohmann::json::parse(*spec);
  ASSERT_EQ(j["devices"].size(), 2u);
  for (const nlohmann::json& d : j["devices"]) {
    EXPECT_THAT(d["containerEdits"]["env"].dump(),
                HasSubstr("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"))
        << d.dump();
    EXPECT_THAT(d["containerEdits"]["mounts"].dump(), HasSubstr("/data/mps/" + id + "/pipe"));
  }

  // A repeated prepare starts nothing; unprepare stops the daemon once.
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-2", "gpu-5"})).ok());
  EXPECT_EQ(mps_->calls.size(), 2u);
  Reopen();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "stop " + id));
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));
}

TEST_F(DeviceStateTest, MpsDaemonNotReadyLeavesClaimStartedAndRetryCompletesIt) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-4")});
  mps_->ready_status = absl::UnavailableError("pod Pending: ErrImageNeverPull");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-4"}, MpsEntry(nullptr)));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ErrImageNeverPull"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);
  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((**stored).prepared_devices[0]["mpsDaemon"]["id"], id);
  EXPECT_FALSE(std::filesystem::exists(SpecPath("uid-1")));

  // The retry keeps the daemon (no stop) and completes it.
  mps_->ready_status = absl::OkStatus();
  Reopen();
  auto retry = state_->Prepare(Claim("uid-1", {"gpu-4"}, MpsEntry(nullptr)));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "ready " + id, "start " + id, "ready " + id));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareCompleted);
  EXPECT_TRUE(std::filesystem::exists(SpecPath("uid-1")));
}

// The cleanup unprepares a claim whose prepare failed after the daemon started; a failing stop
// keeps the claim for the next try.
TEST_F(DeviceStateTest, UnprepareOfStartedMpsClaimStopsTheDaemonAndKeepsTheClaimOnFailure) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  const std::string id = MpsDaemonId("uid-1", {Uuid("gpu-0"), Uuid("gpu-1")});
  mps_->start_status = absl::InternalError("create Deployment: forbidden");
  ASSERT_FALSE(state_->Prepare(Claim("uid-1", {"gpu-0", "gpu-1"}, MpsEntry(nullptr))).ok());
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);

  mps_->stop_status = absl::DeadlineExceededError("pods still present");
  auto s = state_->Unprepare("uid-1");
  EXPECT_THAT(std::string(s.message()), HasSubstr("pods still present"));
  EXPECT_EQ(StateOf("uid-1"), checkpoint::ClaimState::kPrepareStarted);

  mps_->stop_status = absl::OkStatus();
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  EXPECT_THAT(mps_->calls, ElementsAre("start " + id, "stop " + id, "stop " + id));
}

TEST_F(DeviceStateTest, ClaimsWithoutMpsNeverTouchDaemons) {
  Init("h100-8x");
  Configure("MPSSupport=true,TimeSlicingSettings=true");
  ASSERT_TRUE(state_->Prepare(Claim("uid-1", {"gpu-0"})).ok());
  ASSERT_TRUE(state_->Prepare(Claim("uid-2", {"gpu-1"}, TimeSliced("Short"))).ok());
  auto stored = checkpoint_->Get("uid-1");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_FALSE((**stored).prepared_devices[0].contains("mpsDaemon"));
  ASSERT_TRUE(state_->Unprepare("uid-1").ok());
  ASSERT_TRUE(state_->Unprepare("uid-2").ok());
  EXPECT_TRUE(mps_->calls.empty());
  EXPECT_TRUE(mps_->groups.empty());
}

TEST_F(DeviceStateTest, MpsNeedsTheGate) {
  Init("h100-8x");
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(nullptr)));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("\"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" "
                        "feature gate is not enabled"));
  EXPECT_TRUE(mps_->groups.empty());
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

TEST_F(DeviceStateTest, MpsConfigErrorsArePermanentAndStartNothing) {
  struct Case {
    std::string name;
    nlohmann::json mps_config;
    std::string message;
  };
  const Case cases[] = {
      {"index beyond the group",
       {{"defaultPerDevicePinnedMemoryLimit", {{"3", "1Gi"}}}},
       "invalid device: invalid device index: 3"},
      {"limit below 1 MiB",
       {{"defaultPinnedDeviceMemoryLimit", "100Ki"}},
       "invalid limit: default value set too low"},
      {"multi-user on a GPU before Volta",
       {{"multiUser", true}},
       "device gpu-0 (" + std::string("%UUID%") +
           ") has compute capability 6.1; multi-user MPS "
           "needs 7.0 (Volta) or newer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Init("h100-8x");
    // gpu-0 as a Pascal GPU.
    for (AllocatableDevice& d : inventory_.devices) {
      if (d.name == "gpu-0") {
        d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::Version("6.1.0");
      }
    }
    Configure("MPSSupport=true");
    auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(c.mps_config)));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
    std::string want = c.message;
    if (auto pos = want.find("%UUID%"); pos != std::string::npos) {
      want.replace(pos, 6, Uuid("gpu-0"));
    }
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(want));
    EXPECT_TRUE(mps_->groups.empty());
    EXPECT_EQ(StateOf("uid-1"), std::nullopt);
  }
}

TEST_F(DeviceStateTest, MultiUserMpsOnVoltaOrNewerIsAccepted) {
  for (const char* profile : {"t4-2x", "h100-8x"}) {  // compute capability 7.5 and 9.0
    SCOPED_TRACE(profile);
    Init(profile);
    Configure("MPSSupport=true");
    auto r = state_->Prepare(Claim("uid-1", {"gpu-1"}, MpsEntry({{"multiUser", true}})));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(mps_->groups.size(), 1u);
    EXPECT_EQ(mps_->groups[0].config.multi_user, true);
  }
}

TEST_F(DeviceStateTest, ComputeCapabilityComesFromThePublishedAttribute) {
  AllocatableDevice d;
  EXPECT_EQ(ComputeCapabilityOf(d), std::nullopt);
  d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::Version("7.5.0");
  EXPECT_EQ(ComputeCapabilityOf(d), std::make_pair(7, 5));
  d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::Version("10.0.0");
  EXPECT_EQ(ComputeCapabilityOf(d), std::make_pair(10, 0));
  d.published.attributes["cudaComputeCapability"] = k8s::DeviceAttribute::String("x");
  EXPECT_EQ(ComputeCapabilityOf(d), std::nullopt);
}

TEST_F(DeviceStateTest, MpsOnAMigDeviceHasNoComputeModeToSet) {
  Init("a100-mig-4x");
  Configure("MPSSupport=true");
  const AllocatableDevice* mig = nullptr;
  for (const AllocatableDevice& d : inventory_.devices) {
    if (d.type == DeviceType::kMig) {
      mig = &d;
      break;
    }
  }
  ASSERT_NE(mig, nullptr);
  auto r = state_->Prepare(Claim(
      "uid-m", {mig->name}, MpsEntry({{"defaultActiveThreadPercentage", 20}}, "MigDeviceConfig")));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(mps_->groups.size(), 1u);
  EXPECT_THAT(mps_->groups[0].device_uuids, ElementsAre(mig->mig->uuid));
  EXPECT_TRUE(mps_->groups[0].full_gpu_uuids.empty());
  ASSERT_TRUE(state_->Unprepare("uid-m").ok());
  EXPECT_EQ(mps_->calls.back(), "stop " + MpsDaemonId("uid-m", {mig->mig->uuid}));
}

// The gates exclude each other; a gate set that skipped the checks still gets no MPS daemon.
TEST_F(DeviceStateTest, MpsIsRejectedWithDynamicMig) {
  Init("h100-8x");
  ASSERT_TRUE(gates_->SetWithoutConstraintChecks("MPSSupport=true,DynamicMIG=true").ok());
  Reopen();
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(nullptr)));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(api::IsPermanentConfigError(r.status())) << r.status();
  EXPECT_THAT(
      std::string(r.status().message()),
      HasSubstr("MPS sharing is not supported when the feature gate DynamicMIG is enabled"));
  EXPECT_TRUE(mps_->groups.empty());
}

TEST_F(DeviceStateTest, MpsWithoutADaemonFactoryIsAnInternalError) {
  Init("h100-8x");
  Configure("MPSSupport=true");
  state_ = std::make_unique<DeviceState>(
      inventory_, cdi_.get(), checkpoint_.get(),
      DeviceState::Options{.pool_name = "node1", .gates = gates_.get()});
  auto r = state_->Prepare(Claim("uid-1", {"gpu-0"}, MpsEntry(nullptr)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_EQ(StateOf("uid-1"), std::nullopt);
}

}  // namespace
}  // namespace dra::gpu
