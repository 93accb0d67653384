// Host-managed IMEX (--imex-mode=hostManaged): channel claims checked against the host's IMEX
// daemon, daemon claims refused, the slice without daemon-0.

#include "lib/cdplugin/device_state_test_fixture.h"

namespace dra::cdplugin {
namespace {

class HostManagedTest : public DeviceStateTest {
 protected:
  void SetUp() override { BuildHostManaged("dd6ffbfa-8abc-4492-a855-efc01b31186c.7"); }

  void BuildHostManaged(const std::string& clique, bool with_ctl = true) {
    ASSERT_TRUE(MakeDirectories(ctl_root() + "/dev", 0755).ok());
    ASSERT_TRUE(MakeDirectories(ctl_root() + "/usr/bin", 0755).ok());
    fs::remove(ctl_root() + "/usr/bin/nvidia-imex-ctl");
    if (with_ctl) {
      ASSERT_TRUE(
          WriteFileAtomically(ctl_root() + "/usr/bin/nvidia-imex-ctl",
                              absl::StrCat("#!/bin/sh\necho \"$@\" >>", tmp_.path(),
                                           "/ctl-args\ncat ", tmp_.path(), "/ctl-answer\nexit 0\n"),
                              0755)
              .ok());
    }
    Answer("READY\n");
    auto ctl = driverroot::DriverRoot::Create({.root = ctl_root()});
    ASSERT_TRUE(ctl.ok()) << ctl.status();
    ctl_driver_root_ = *std::move(ctl);
    host_imex_ =
        std::make_unique<HostImex>(ctl_driver_root_.get(), "/etc/nvidia-imex/imex_ctrl.sock");
    Build(clique);
  }
  void Answer(const std::string& text) {
    ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/ctl-answer", text).ok());
  }
  std::string CtlArgs() const { return ReadFile(tmp_.path() + "/ctl-args").value_or(""); }
  std::string ctl_root() const { return tmp_.path() + "/ctl-root"; }

  std::unique_ptr<driverroot::DriverRoot> ctl_driver_root_;
};

TEST_F(HostManagedTest, ChannelNeedsOnlyTheHostDaemonReady) {
  api_.AddDomain("cd-1", "user-ns", "my-domain");
  // allocationMode All is ignored: the host's daemon owns the channels; one is injected.
  auto devices = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1", "All"));
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_THAT((*devices)[0].cdi_device_ids,
              ElementsAre("k8s.compute-domain.nvidia.com/claim=c1-channel-0"));
  const cdi::Spec spec = ReadSpec("c1");
  const auto& nodes = spec.devices.at(0).container_edits.device_nodes;
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].path, "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_EQ(nodes[0].major, mock_nvml::kNvidiaCapsImexChannelsMajor);
  EXPECT_EQ(nodes[0].minor, 0);
  EXPECT_EQ(CtlArgs(), "-q --u=" + ctl_root() + "/etc/nvidia-imex/imex_ctrl.sock\n");
  EXPECT_EQ(api_.label, "") << "no node label in hostManaged mode";
  EXPECT_EQ(api_.ready_calls, 0) << "no clique readiness in hostManaged mode";
  EXPECT_EQ(PhaseOf("c1"), Phase::kCompleted);

  api_.label = "left-by-someone";
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(api_.label, "left-by-someone");
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
}

TEST_F(HostManagedTest, HostDaemonNotReadyIsRetryableAndNamesTheOutput) {
  api_.AddDomain("cd-1", "user-ns", "d");
  Answer("NOT READY: waiting for peers: node-b\n");
  auto first = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_FALSE(first.ok());
  EXPECT_FALSE(IsPermanent(first.status()));
  EXPECT_THAT(first.status().message(), HasSubstr("host-managed IMEX daemon not ready"));
  EXPECT_THAT(first.status().message(), HasSubstr("NOT READY: waiting for peers: node-b"));
  EXPECT_EQ(PhaseOf("c1"), Phase::kStarted);
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  Answer("");
  EXPECT_FALSE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  Answer("READY\n");
  EXPECT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
}

TEST_F(HostManagedTest, MissingImexCtlIsRetryable) {
  BuildHostManaged("dd6ffbfa-8abc-4492-a855-efc01b31186c.7", /*with_ctl=*/false);
  api_.AddDomain("cd-1", "user-ns", "d");
  auto r = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(IsPermanent(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("nvidia-imex-ctl not found in the driver root"));
}

TEST_F(HostManagedTest, DaemonClaimsAreRefusedPermanently) {
  api_.AddDomain("cd-1", "user-ns", "d");
  auto r = state_->Prepare(DaemonClaim("d1", "cd-1"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsPermanent(r.status()));
  EXPECT_THAT(
      r.status().message(),
      HasSubstr("ComputeDomain daemon claims are not supported when imex.mode=hostManaged"));
  EXPECT_EQ(PhaseOf("d1"), std::nullopt);
  EXPECT_FALSE(fs::exists(state_->DomainDir("cd-1")));
}

TEST_F(HostManagedTest, NamespaceAndChannelOwnershipAreStillChecked) {
  api_.AddDomain("cd-1", "user-ns", "d");
  auto other_ns = state_->Prepare(ChannelClaim("c0", "other-ns", "cd-1"));
  ASSERT_FALSE(other_ns.ok());
  EXPECT_TRUE(IsPermanent(other_ns.status()));
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  auto second = state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1"));
  ASSERT_FALSE(second.ok());
  EXPECT_FALSE(IsPermanent(second.status()));
  EXPECT_THAT(second.status().message(), HasSubstr("already allocated by claim c1"));
}

TEST_F(HostManagedTest, NodeWithoutFabricSucceedsWithoutAskingTheHost) {
  BuildHostManaged("");
  api_.AddDomain("cd-1", "user-ns", "d");
  auto r = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].cdi_device_ids.empty());
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  EXPECT_EQ(CtlArgs(), "");
}

TEST(SlicesTest, HostManagedPublishesOnlyChannelZero) {
  auto names = [](const kubeletplugin::DriverResources& r) {
    std::vector<std::string> out;
    for (const k8s::Device& d : r.pools.at("node-a").slices.at(0).devices) out.push_back(d.name);
    return out;
  };
  EXPECT_THAT(names(PublishedResources("node-a")), ElementsAre("channel-0", "daemon-0"));
  EXPECT_THAT(names(PublishedResources("node-a", /*with_daemon=*/false)), ElementsAre("channel-0"));
}

TEST(SlicesTest, BindingConditionsOnChannelZeroOnly) {
  const kubeletplugin::DriverResources published =
      PublishedResources("node-a", /*with_daemon=*/true, /*binding_conditions=*/true);
  const std::vector<k8s::Device>& devices = published.pools.at("node-a").slices.at(0).devices;
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].name, "channel-0");
  EXPECT_THAT(devices[0].binding_conditions, ElementsAre("IMEXDaemonReady"));
  EXPECT_THAT(devices[0].binding_failure_conditions, ElementsAre("IMEXDaemonFailed"));
  // The daemon's own device never waits: nothing would report its conditions.
  EXPECT_EQ(devices[1].name, "daemon-0");
  EXPECT_TRUE(devices[1].binding_conditions.empty());
  EXPECT_TRUE(devices[1].binding_failure_conditions.empty());
  const kubeletplugin::DriverResources plain = PublishedResources("node-a");
  for (const k8s::Device& d : plain.pools.at("node-a").slices.at(0).devices) {
    EXPECT_TRUE(d.binding_conditions.empty()) << d.name;
  }
}

// The driver's retry loop, on real time with short backoffs.

}  // namespace
}  // namespace dra::cdplugin
