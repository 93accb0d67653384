#pragma once

// The fixture of the DeviceState tests (device_state_test.cc, device_state_sharing_test.cc,
// device_state_mps_test.cc): prepare/unprepare against a mock driver root, with the inventory from
// the mock NVML, a real checkpoint and real CDI spec files in a temp dir, and MPS daemons faked.

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
#include "lib/gpuplugin/mps/mps_sharing.h"
#include "lib/gpuplugin/prepare/device_state.h"
#include "lib/gpuplugin/prepare/rebuild.h"
#include "lib/gpuplugin/record/go_prepared.h"
#include "lib/nvml/nvml.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {

// MPS daemons that record what prepare and unprepare ask of them.
class FakeMpsDaemons final : public MpsDaemons {
 public:
  class Daemon final : public MpsDaemon {
   public:
    Daemon(const FakeMpsDaemons* owner, MpsDaemonGroup group)
        : owner_(owner), group_(std::move(group)) {}
    MpsDaemonRecord Record() const override {
      return {
          .id = group_.id.empty() ? MpsDaemonId(group_.claim_uid, group_.device_uuids) : group_.id,
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
    // As the plugin does: a Go driver's checkpoint is adopted (go_prepared.h), and after a reboot
    // the claims' CDI specs go with their records (rebuild.h).
    checkpoint::CheckpointOptions cp_options;
    cp_options.convert_go_devices = GoDevicesConverter(inventory_, "mps-ns");
    cp_options.on_reboot = RemoveClaimSpecsOnReboot(tmp_.path() + "/cdi");
    auto cp =
        checkpoint::Checkpoint::Open(tmp_.path() + "/plugin", tmp_.path() + "/boot_id", cp_options);
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = std::move(*cp);
    state_ = std::make_unique<DeviceState>(
        inventory_, cdi_.get(), checkpoint_.get(),
        DeviceState::Options{.pool_name = "node1",
                             .gates = gates_.get(),
                             .consumable_shares = shares_,
                             .services = {.time_slicing = time_slicing_.get(), .mps = mps_.get()},
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

// A claim config entry: GpuConfig with the given sharing (null: none), for all requests.
inline nlohmann::json GpuConfigEntry(const nlohmann::json& sharing) {
  nlohmann::json params = {{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "GpuConfig"}};
  if (!sharing.is_null()) params["sharing"] = sharing;
  return nlohmann::json::array(
      {{{"source", "FromClaim"},
        {"requests", nlohmann::json::array()},
        {"opaque", {{"driver", "gpu.nvidia.com"}, {"parameters", params}}}}});
}
// GpuConfigEntry with time-slicing at `interval`.
inline nlohmann::json TimeSliced(const std::string& interval) {
  return GpuConfigEntry(
      {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}});
}

// A config entry: MigDeviceConfig with the given sharing for `requests` (empty: all).
inline nlohmann::json MigEntry(const nlohmann::json& sharing,
                               const nlohmann::json& requests = nlohmann::json::array()) {
  return {{"source", "FromClaim"},
          {"requests", requests},
          {"opaque",
           {{"driver", "gpu.nvidia.com"},
            {"parameters",
             {{"apiVersion", "resource.nvidia.com/v1beta1"},
              {"kind", "MigDeviceConfig"},
              {"sharing", sharing}}}}}};
}
// MigEntry with time-slicing at `interval`, for all requests.
inline nlohmann::json MigTimeSliced(const std::string& interval) {
  return nlohmann::json::array(
      {MigEntry({{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}})});
}

}  // namespace dra::gpu
