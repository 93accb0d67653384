// Prepare/unprepare of compute-domain claims (device_state.h) against a gb200-4x mock driver
// root, a real checkpoint and real CDI spec files, with the API server faked (DomainApi), and the
// cleanup (cleanup.h).

#include "lib/cdplugin/device_state_test_fixture.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"

namespace dra::cdplugin {
namespace {

using ::testing::Not;

TEST_F(DeviceStateTest, DaemonClaimGetsEnvMountsAndCapability) {
  api_.AddDomain("cd-1", "user-ns", "my-domain");
  auto devices = state_->Prepare(DaemonClaim("d1", "cd-1"));
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].device_name, "daemon-0");
  EXPECT_EQ((*devices)[0].pool_name, "node-a");
  EXPECT_THAT((*devices)[0].cdi_device_ids,
              ElementsAre("k8s.compute-domain.nvidia.com/device=all",
                          "k8s.compute-domain.nvidia.com/claim=d1-daemon-0"));
  const std::string dir = plugin_dir() + "/domains/cd-1";
  EXPECT_EQ(*ReadFile(dir + "/imexd.cfg.tmpl"), ImexConfigTemplate());
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);

  cdi::Spec spec = ReadSpec("d1");
  EXPECT_EQ(spec.kind, "k8s.compute-domain.nvidia.com/claim");
  ASSERT_EQ(spec.devices.size(), 1u);
  EXPECT_EQ(spec.devices[0].name, "d1-daemon-0");
  const cdi::ContainerEdits& e = spec.devices[0].container_edits;
  EXPECT_THAT(e.env, ElementsAre("CLIQUE_ID=dd6ffbfa-8abc-4492-a855-efc01b31186c.7",
                                 "COMPUTE_DOMAIN_UUID=cd-1", "COMPUTE_DOMAIN_NAME=my-domain",
                                 "COMPUTE_DOMAIN_NAMESPACE=user-ns"));
  ASSERT_EQ(e.mounts.size(), 3u);
  EXPECT_EQ(e.mounts[0].container_path, "/imexd");
  EXPECT_EQ(e.mounts[0].host_path, dir);
  EXPECT_THAT(e.mounts[0].options, ElementsAre("rw", "nosuid", "nodev", "bind"));
  EXPECT_EQ(e.mounts[1].container_path, "/usr/bin/nvidia-imex");
  EXPECT_EQ(e.mounts[1].host_path, "/host-driver/usr/bin/nvidia-imex");  // host view
  EXPECT_EQ(e.mounts[2].container_path, "/usr/bin/nvidia-imex-ctl");
  EXPECT_EQ(e.mounts[2].host_path, "/host-driver/usr/bin/nvidia-imex-ctl");
  ASSERT_EQ(e.device_nodes.size(), 1u);
  EXPECT_EQ(e.device_nodes[0].path, "/dev/nvidia-caps/nvidia-cap0");
  EXPECT_EQ(e.device_nodes[0].type, "c");
  EXPECT_EQ(e.device_nodes[0].major, mock_nvml::kNvidiaCapsMajor);
  EXPECT_EQ(e.device_nodes[0].minor, 0);
  EXPECT_EQ(e.device_nodes[0].file_mode, 0400u);
  EXPECT_EQ(PhaseOf("d1"), Phase::kCompleted);
  EXPECT_EQ(api_.label, "");  // daemon claims do not label the node
  // The daemon claim is in the driver namespace (driver-ns), not the domain's.
}

// A daemon device hands out the domain's IMEX directory and the fabric-imex-mgmt capability:
// only the driver's own IMEX DaemonSet pods, in the driver namespace, may have one. A claim from
// any other namespace (a tenant's pod claiming another domain's daemon) is refused for good, and
// nothing is recorded or written.
TEST_F(DeviceStateTest, DaemonClaimOutsideTheDriverNamespaceIsPermanentlyRefused) {
  api_.AddDomain("cd-1", "victim-ns", "their-domain");
  auto r = state_->Prepare(
      Claim("t1", "tenant-ns", "daemon-0", Params("ComputeDomainDaemonConfig", "cd-1")));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsPermanent(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("claim tenant-ns/claim-t1"));
  EXPECT_THAT(r.status().message(), HasSubstr("device daemon-0"));
  EXPECT_THAT(r.status().message(), HasSubstr("namespace \"tenant-ns\""));
  EXPECT_THAT(r.status().message(), HasSubstr("driver namespace \"driver-ns\""));
  EXPECT_EQ(PhaseOf("t1"), std::nullopt);
  EXPECT_FALSE(fs::exists(SpecPath("t1")));
  EXPECT_FALSE(fs::exists(plugin_dir() + "/domains/cd-1"));
  // The driver's own daemon claim of the same domain still prepares.
  EXPECT_TRUE(state_->Prepare(DaemonClaim("d1", "cd-1")).ok());
}

TEST_F(DeviceStateTest, DaemonClaimOfUnknownDomainIsRetryable) {
  auto devices = state_->Prepare(DaemonClaim("d1", "cd-unknown"));
  ASSERT_FALSE(devices.ok());
  EXPECT_FALSE(IsPermanent(devices.status()));
  EXPECT_THAT(devices.status().message(), HasSubstr("compute domain not found: cd-unknown"));
}

TEST_F(DeviceStateTest, ChannelClaimWaitsForTheDaemonThenGetsChannelZero) {
  api_.AddDomain("cd-1", "user-ns", "my-domain");
  auto first = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_FALSE(first.ok());
  EXPECT_FALSE(IsPermanent(first.status()));
  EXPECT_THAT(first.status().message(), HasSubstr("current node not ready in ComputeDomain"));
  EXPECT_EQ(api_.label, "cd-1");  // the label brings the daemon pod
  EXPECT_EQ(api_.asked_clique, "dd6ffbfa-8abc-4492-a855-efc01b31186c.7");
  EXPECT_EQ(PhaseOf("c1"), Phase::kStarted);
  EXPECT_FALSE(fs::exists(SpecPath("c1")));

  api_.ready.insert("cd-1");
  auto devices = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_THAT((*devices)[0].cdi_device_ids,
              ElementsAre("k8s.compute-domain.nvidia.com/claim=c1-channel-0"));
  cdi::Spec spec = ReadSpec("c1");
  ASSERT_EQ(spec.devices.size(), 1u);
  EXPECT_EQ(spec.devices[0].name, "c1-channel-0");
  const auto& nodes = spec.devices[0].container_edits.device_nodes;
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].path, "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_EQ(nodes[0].host_path, "");
  EXPECT_EQ(nodes[0].type, "c");
  EXPECT_EQ(nodes[0].major, mock_nvml::kNvidiaCapsImexChannelsMajor);
  EXPECT_EQ(nodes[0].minor, 0);
  EXPECT_EQ(nodes[0].file_mode, 0666u);
  EXPECT_EQ(PhaseOf("c1"), Phase::kCompleted);

  // Idempotent: a completed claim is answered from the checkpoint.
  const int calls = api_.ready_calls;
  auto again = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].cdi_device_ids, (*devices)[0].cdi_device_ids);
  EXPECT_EQ(api_.ready_calls, calls);
}

TEST_F(DeviceStateTest, AllocationModeAllInjectsEveryChannel) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1", "All")).ok());
  const cdi::Spec spec = ReadSpec("c1");
  const auto& nodes = spec.devices.at(0).container_edits.device_nodes;
  ASSERT_EQ(nodes.size(), 2048u);
  EXPECT_EQ(nodes[222].path, "/dev/nvidia-caps-imex-channels/channel222");
  EXPECT_EQ(nodes[2047].path, "/dev/nvidia-caps-imex-channels/channel2047");
  EXPECT_EQ(nodes[2047].minor, 2047);
}

TEST_F(DeviceStateTest, DomainMustExistInTheClaimsNamespace) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  auto other_ns = state_->Prepare(ChannelClaim("c1", "other-ns", "cd-1"));
  ASSERT_FALSE(other_ns.ok());
  EXPECT_TRUE(IsPermanent(other_ns.status()));
  EXPECT_THAT(other_ns.status().message(),
              HasSubstr("namespace is different than the ComputeDomain's namespace"));
  auto unknown = state_->Prepare(ChannelClaim("c2", "user-ns", "cd-2"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(IsPermanent(unknown.status()));
  EXPECT_THAT(unknown.status().message(), HasSubstr("ComputeDomain not found: cd-2"));
  EXPECT_EQ(api_.label, "");
  EXPECT_EQ(PhaseOf("c1"), std::nullopt);  // nothing recorded before the checks pass
}

TEST_F(DeviceStateTest, UnknownConfigFieldIsPermanent) {
  nlohmann::json params = Params("ComputeDomainChannelConfig", "cd-1");
  params["unexpectedField"] = true;
  auto r = state_->Prepare(Claim("c1", "user-ns", "channel-0", params));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsPermanent(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("unknown field \"unexpectedField\""));
}

TEST_F(DeviceStateTest, AnotherDomainsLabelIsRetryable) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.label = "cd-other";
  auto r = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(IsPermanent(r.status()));
  EXPECT_THAT(r.status().message(), HasSubstr("different ComputeDomain"));
}

TEST_F(DeviceStateTest, ChannelZeroHeldByAnotherCompletedClaimIsRetryable) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  auto second = state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1"));
  ASSERT_FALSE(second.ok());
  EXPECT_FALSE(IsPermanent(second.status()));
  EXPECT_THAT(second.status().message(),
              HasSubstr("channel 0 already allocated by claim c1 (according to checkpoint)"));
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_TRUE(state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1")).ok());
}

TEST_F(DeviceStateTest, AdminAccessClaimMayShareTheDevice) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_TRUE(state_->Prepare(DaemonClaim("d1", "cd-1")).ok());
  k8s::ResourceClaim admin = DaemonClaim("d2", "cd-1");
  admin.status.allocation->devices.results[0].admin_access = true;
  EXPECT_TRUE(state_->Prepare(admin).ok());
  EXPECT_FALSE(state_->Prepare(DaemonClaim("d3", "cd-1")).ok());
}

TEST_F(DeviceStateTest, UndecodableRecordsDoNotWedgeTheClaim) {
  api_.AddDomain("cd-1", "user-ns", "d");
  auto corrupt = [&](const std::string& uid) {
    ASSERT_TRUE(checkpoint_
                    ->Update([&](checkpoint::ClaimMap& m) {
                      m[uid] = {.uid = uid,
                                .state = checkpoint::ClaimState::kPrepareCompleted,
                                .prepared_devices = {{"phase", "Bogus"}}};
                      return absl::OkStatus();
                    })
                    .ok());
  };
  corrupt("d1");
  auto prepared = state_->Prepare(DaemonClaim("d1", "cd-1"));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(PhaseOf("d1"), Phase::kCompleted);
  corrupt("d2");
  ASSERT_TRUE(state_->Unprepare("d2").ok());
  auto gone = checkpoint_->Get("d2");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_F(DeviceStateTest, UnprepareRemovesLabelSpecAndRecord) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  ASSERT_TRUE(state_->Prepare(DaemonClaim("d1", "cd-1")).ok());
  ASSERT_TRUE(fs::exists(SpecPath("c1")));
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(api_.label, "");
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  EXPECT_EQ(PhaseOf("c1"), std::nullopt);
  ASSERT_TRUE(state_->Unprepare("c1").ok());  // idempotent
  ASSERT_TRUE(state_->Unprepare("never-prepared").ok());
  // Another domain's label stays.
  api_.label = "cd-other";
  ASSERT_TRUE(state_->Unprepare("d1").ok());
  EXPECT_EQ(api_.label, "cd-other");
  // The per-domain directory stays for the cleanup.
  EXPECT_TRUE(fs::exists(plugin_dir() + "/domains/cd-1/imexd.cfg.tmpl"));
}

TEST_F(DeviceStateTest, LabelStaysWhileAnotherClaimOfTheDomainIsPrepared) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());  // started
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1")).ok());
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(api_.label, "cd-1");  // c2 still needs its daemon
  ASSERT_TRUE(state_->Unprepare("c2").ok());
  EXPECT_EQ(api_.label, "");
}

TEST_F(DeviceStateTest, AbortedPrepareIsStaleUntilTheAllocationChangesAndExpires) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());  // not ready
  ASSERT_EQ(PhaseOf("c1"), Phase::kStarted);
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(PhaseOf("c1"), Phase::kAborted);
  EXPECT_EQ(api_.label, "");                  // the half-prepared claim's label went too
  ASSERT_TRUE(state_->Unprepare("c1").ok());  // noop

  api_.ready.insert("cd-1");
  auto stale = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(IsPermanent(stale.status()));
  EXPECT_THAT(stale.status().message(), HasSubstr("claim prepare was already aborted"));
  // Another allocation of the same UID starts over.
  EXPECT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1", "All")).ok());

  // Expiry: the cleanup drops aborted records after 90 s.
  ASSERT_FALSE(state_->Prepare(DaemonClaim("d1", "cd-missing")).ok());
  ASSERT_TRUE(state_->Unprepare("d1").ok());
  api_.claims["driver-ns/claim-d1"] = "d1";
  Cleanup cleanup(state_.get(), checkpoint_.get(), &api_, &clock_);
  ASSERT_TRUE(cleanup.RunCheckpointPass().ok());
  EXPECT_EQ(PhaseOf("d1"), Phase::kAborted);
  clock_.Advance(absl::Seconds(91));
  ASSERT_TRUE(cleanup.RunCheckpointPass().ok());
  EXPECT_EQ(PhaseOf("d1"), std::nullopt);
  EXPECT_EQ(PhaseOf("c1"), Phase::kCompleted);
}

TEST_F(DeviceStateTest, CleanupUnpreparesClaimsThatAreGoneAndStaleDomainDirs) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1")).ok());
  api_.claims["user-ns/claim-c2"] = "c2";  // c1's ResourceClaim is gone, c2's is there
  ASSERT_TRUE(fs::create_directories(plugin_dir() + "/domains/cd-gone"));
  ASSERT_TRUE(fs::create_directories(plugin_dir() + "/domains/cd-1"));
  Cleanup cleanup(state_.get(), checkpoint_.get(), &api_, &clock_);
  ASSERT_TRUE(cleanup.RunCheckpointPass().ok());
  EXPECT_EQ(PhaseOf("c1"), Phase::kAborted);
  EXPECT_EQ(PhaseOf("c2"), Phase::kStarted);
  ASSERT_TRUE(cleanup.RemoveStaleDomainDirs().ok());
  EXPECT_FALSE(fs::exists(plugin_dir() + "/domains/cd-gone"));
  EXPECT_TRUE(fs::exists(plugin_dir() + "/domains/cd-1"));
}

// The cleanup's lines in the public driver's words (docs/compatibility.md "Log lines"): the
// unprepared stale claim at level 0, why it was stale only at -v=4.
TEST_F(DeviceStateTest, CleanupLogsTheUnpreparedStaleClaimAtLevelZero) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  Cleanup cleanup(state_.get(), checkpoint_.get(), &api_, &clock_);
  log::LogCapture logs(/*verbosity=*/0);
  absl::Status s = cleanup.RunCheckpointPass();
  ASSERT_TRUE(s.ok()) << s;
  const std::string all = logs.Text();
  EXPECT_THAT(all, HasSubstr("] \"Checkpointed RC cleanup: unprepared stale claim\" "
                             "claim=\"user-ns/claim-c1:c1\"\n"));
  EXPECT_THAT(all, Not(HasSubstr("is stale")));
}

TEST_F(DeviceStateTest, NodeWithoutFabricGetsNoChannelDevice) {
  Build("");
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  auto channel = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_TRUE((*channel)[0].cdi_device_ids.empty());
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  EXPECT_EQ(api_.asked_clique, "");
  auto daemon = state_->Prepare(DaemonClaim("d1", "cd-1"));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const cdi::Spec spec = ReadSpec("d1");
  const cdi::ContainerEdits& e = spec.devices.at(0).container_edits;
  EXPECT_EQ(e.env[0], "CLIQUE_ID=");
  EXPECT_TRUE(e.device_nodes.empty());
}

TEST_F(DeviceStateTest, RediscoveredCliqueIdIsAdoptedOnlyWhenNotEmpty) {
  EXPECT_FALSE(state_->SetCliqueId(""));
  EXPECT_FALSE(state_->SetCliqueId("dd6ffbfa-8abc-4492-a855-efc01b31186c.7"));
  EXPECT_TRUE(state_->SetCliqueId("dd6ffbfa-8abc-4492-a855-efc01b31186c.8"));
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(DaemonClaim("d1", "cd-1")).ok());
  const cdi::Spec spec = ReadSpec("d1");
  EXPECT_EQ(spec.devices.at(0).container_edits.env.at(0),
            "CLIQUE_ID=dd6ffbfa-8abc-4492-a855-efc01b31186c.8");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  EXPECT_EQ(api_.asked_clique, "dd6ffbfa-8abc-4492-a855-efc01b31186c.8");
}

TEST_F(DeviceStateTest, BaseSpecHasTheDriverButNotTheImexBinaries) {
  auto path = cdi_->WriteBaseSpec(*root_);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, cdi_dir() + "/k8s.compute-domain.nvidia.com-device_base.json");
  auto spec = cdi::DecodeSpec(*ReadFile(*path));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->kind, "k8s.compute-domain.nvidia.com/device");
  ASSERT_EQ(spec->devices.size(), 1u);
  EXPECT_EQ(spec->devices[0].name, "all");
  const cdi::ContainerEdits& e = spec->devices[0].container_edits;
  EXPECT_THAT(e.env, ::testing::Contains("NVIDIA_VISIBLE_DEVICES=void"));
  bool smi = false;
  for (const cdi::Mount& m : e.mounts) {
    EXPECT_NE(m.container_path, "/usr/bin/nvidia-imex");
    EXPECT_NE(m.container_path, "/usr/bin/nvidia-imex-ctl");
    smi = smi || m.container_path == "/usr/bin/nvidia-smi";
    EXPECT_EQ(m.host_path.rfind("/host-driver/", 0), 0u) << m.host_path;
  }
  EXPECT_TRUE(smi);
}

// --imex-mode=hostManaged: a small root of its own holds a scripted nvidia-imex-ctl that records
// its arguments and prints what the test wants.

}  // namespace
}  // namespace dra::cdplugin
