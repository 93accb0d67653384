#pragma once

// Shared by the compute-domain plugin's prepare tests (device_state_test.cc,
// host_managed_test.cc, driver_test.cc): a faked API server (DomainApi), claims, a gb200-4x mock
// driver root, and a DeviceState over a real checkpoint and real CDI spec files.

#include <sys/stat.h>

#include <filesystem>
#include <future>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdi/spec.h"
#include "lib/cdplugin/cleanup.h"
#include "lib/cdplugin/driver.h"
#include "lib/cdplugin/errors.h"
#include "lib/cdplugin/imex_config_template.h"
#include "lib/cdplugin/slices.h"
#include "lib/common/atomic_file.h"
#include "test/doubles/mock-nvml/caps_minors.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::cdplugin {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeDomainApi : public DomainApi {
 public:
  std::shared_ptr<const k8s::ComputeDomain> FindDomain(const std::string& uid) const override {
    absl::MutexLock l(&mu);
    auto it = domains.find(uid);
    return it == domains.end() ? nullptr : it->second;
  }
  absl::Status AddNodeLabel(const std::string& cd_uid) override {
    absl::MutexLock l(&mu);
    if (!label.empty() && label != cd_uid) {
      return RetryableError("label already exists for a different ComputeDomain");
    }
    label = cd_uid;
    return absl::OkStatus();
  }
  absl::Status RemoveNodeLabel(const std::string& cd_uid) override {
    absl::MutexLock l(&mu);
    ++label_removals;
    if (label == cd_uid) label.clear();
    return absl::OkStatus();
  }
  absl::StatusOr<bool> DaemonReady(const k8s::ComputeDomain& domain,
                                   const std::string& clique_id) override {
    absl::MutexLock l(&mu);
    ++ready_calls;
    asked_clique = clique_id;
    if (ready_after_calls > 0 && ready_calls >= ready_after_calls) return true;
    return ready.count(domain.metadata.uid) > 0;
  }
  absl::StatusOr<std::optional<std::string>> ClaimUid(const std::string& ns,
                                                      const std::string& name) override {
    absl::MutexLock l(&mu);
    auto it = claims.find(ns + "/" + name);
    if (it == claims.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }

  void AddDomain(const std::string& uid, const std::string& ns, const std::string& name) {
    auto cd = std::make_shared<k8s::ComputeDomain>();
    cd->metadata.uid = uid;
    cd->metadata.namespace_name = ns;
    cd->metadata.name = name;
    absl::MutexLock l(&mu);
    domains[uid] = cd;
  }

  mutable absl::Mutex mu;
  std::map<std::string, std::shared_ptr<const k8s::ComputeDomain>> domains;
  std::string label;
  int label_removals = 0;  // RemoveNodeLabel calls
  std::set<std::string> ready;
  int ready_calls = 0;
  int ready_after_calls = 0;  // > 0: ready from that call on
  std::string asked_clique;
  std::map<std::string, std::string> claims;  // "ns/name" -> uid
};

inline nlohmann::json Params(const std::string& kind, const std::string& domain,
                             const std::string& mode = "") {
  nlohmann::json j = {
      {"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", kind}, {"domainID", domain}};
  if (!mode.empty()) j["allocationMode"] = mode;
  return j;
}

inline k8s::ResourceClaim Claim(const std::string& uid, const std::string& ns,
                                const std::string& device, const nlohmann::json& params) {
  const std::string request = device.rfind("channel", 0) == 0 ? "channel" : "daemon";
  auto claim = k8s::ResourceClaim::FromJson(
      {{"apiVersion", "resource.k8s.io/v1"},
       {"kind", "ResourceClaim"},
       {"metadata", {{"name", "claim-" + uid}, {"namespace", ns}, {"uid", uid}}},
       {"spec", nlohmann::json::object()},
       {"status",
        {{"allocation",
          {{"devices",
            {{"results",
              {{{"request", request},
                {"driver", kDriverName},
                {"pool", "node-a"},
                {"device", device}}}},
             {"config",
              {{{"source", "FromClaim"},
                {"requests", {request}},
                {"opaque", {{"driver", kDriverName}, {"parameters", params}}}}}}}}}}}}});
  EXPECT_TRUE(claim.ok()) << claim.status();
  return *claim;
}

inline k8s::ResourceClaim ChannelClaim(const std::string& uid, const std::string& ns,
                                       const std::string& domain, const std::string& mode = "") {
  return Claim(uid, ns, "channel-0", Params("ComputeDomainChannelConfig", domain, mode));
}
inline k8s::ResourceClaim DaemonClaim(const std::string& uid, const std::string& domain) {
  return Claim(uid, "driver-ns", "daemon-0", Params("ComputeDomainDaemonConfig", domain));
}

// A mock gb200-4x root (shared by all tests: building one takes a while), removed at exit (ctest
// runs each test in a process of its own, so a root that outlived the process would be left in
// /tmp once per test).
class MockRoot {
 public:
  static const std::string& Path() {
    static MockRoot root;
    return root.dir_.path();
  }

 private:
  MockRoot() {
    EXPECT_TRUE(dra::testing::MakeMockDriverRoot("gb200-4x", dir_.path()).ok());
    // Stand-ins for the IMEX binaries unless the fakes were installed.
    for (const char* name : {"nvidia-imex", "nvidia-imex-ctl"}) {
      const std::string path = dir_.path() + "/usr/bin/" + name;
      if (!fs::exists(path)) {
        EXPECT_TRUE(WriteFileAtomically(path, "#!/bin/sh\n", 0755).ok());
      }
    }
  }
  dra::testing::TempDir dir_;
};

class DeviceStateTest : public ::testing::Test {
 protected:
  void SetUp() override { Build("dd6ffbfa-8abc-4492-a855-efc01b31186c.7"); }

  void Build(const std::string& clique) {
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-1\n").ok());
    auto root = driverroot::DriverRoot::Create({.root = MockRoot::Path(),
                                                .host_root = "/host-driver",
                                                .proc_root = MockRoot::Path() + "/proc"});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = *std::move(root);
    auto cp = checkpoint::Checkpoint::Open(plugin_dir(), tmp_.path() + "/boot_id");
    ASSERT_TRUE(cp.ok()) << cp.status();
    checkpoint_ = *std::move(cp);
    auto cdi = CdiSpecs::Create(cdi_dir());
    ASSERT_TRUE(cdi.ok());
    cdi_ = *std::move(cdi);
    state_ = std::make_unique<DeviceState>(
        DeviceStateOptions{.node_name = "node-a",
                           .driver_namespace = "driver-ns",
                           .plugin_dir = plugin_dir(),
                           .clique_id = clique,
                           .imex_channels_major = mock_nvml::kNvidiaCapsImexChannelsMajor,
                           .root = root_.get(),
                           .clock = &clock_,
                           .host_imex = host_imex_.get()},
        checkpoint_.get(), cdi_.get(), &api_);
  }

  std::string plugin_dir() const { return tmp_.path() + "/plugin"; }
  std::string cdi_dir() const { return tmp_.path() + "/cdi"; }
  std::string SpecPath(const std::string& uid) const {
    return cdi_dir() + "/k8s.compute-domain.nvidia.com-claim_" + uid + ".json";
  }
  cdi::Spec ReadSpec(const std::string& uid) const {
    auto text = ReadFile(SpecPath(uid));
    EXPECT_TRUE(text.ok()) << text.status();
    auto spec = cdi::DecodeSpec(text.ok() ? *text : "");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? *spec : cdi::Spec();
  }
  std::optional<Phase> PhaseOf(const std::string& uid) const {
    auto c = checkpoint_->Get(uid);
    EXPECT_TRUE(c.ok());
    if (!c.ok() || !c->has_value()) return std::nullopt;
    return DecodeRecord(**c)->phase;
  }

  dra::testing::TempDir tmp_;
  FakeClock clock_;
  FakeDomainApi api_;
  std::unique_ptr<driverroot::DriverRoot> root_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  std::unique_ptr<CdiSpecs> cdi_;
  std::unique_ptr<HostImex> host_imex_;  // set before Build: hostManaged
  std::unique_ptr<DeviceState> state_;
};

}  // namespace dra::cdplugin
