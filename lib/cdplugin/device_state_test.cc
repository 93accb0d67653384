// Prepare/unprepare of compute-domain claims (device_state.h) against a gb200-4x mock driver
// root, a real checkpoint and real CDI spec files, with the API server faked (DomainApi); the
// driver's in-call retries (driver.h) and the cleanup (cleanup.h).

#include "lib/cdplugin/device_state.h"

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
namespace {

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
  std::set<std::string> ready;
  int ready_calls = 0;
  int ready_after_calls = 0;  // > 0: ready from that call on
  std::string asked_clique;
  std::map<std::string, std::string> claims;  // "ns/name" -> uid
};

nlohmann::json Params(const std::string& kind, const std::string& domain,
                      const std::string& mode = "") {
  nlohmann::json j = {
      {"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", kind}, {"domainID", domain}};
  if (!mode.empty()) j["allocationMode"] = mode;
  return j;
}

k8s::ResourceClaim Claim(const std::string& uid, const std::string& ns, const std::string& device,
                         const nlohmann::json& params) {
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

k8s::ResourceClaim ChannelClaim(const std::string& uid, const std::string& ns,
                                const std::string& domain, const std::string& mode = "") {
  return Claim(uid, ns, "channel-0", Params("ComputeDomainChannelConfig", domain, mode));
}
k8s::ResourceClaim DaemonClaim(const std::string& uid, const std::string& domain) {
  return Claim(uid, "driver-ns", "daemon-0", Params("ComputeDomainDaemonConfig", domain));
}

// A mock gb200-4x root (shared by all tests: building one takes a while).
class MockRoot {
 public:
  static const std::string& Path() {
    static MockRoot* root = new MockRoot();
    return root->dir_.path();
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
  // The daemon claim has no namespace check: it lives in the driver namespace.
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

// The driver's retry loop, on real time with short backoffs.
class DriverTest : public DeviceStateTest {
 protected:
  gpu::DriverMetrics* Metrics() {
    if (!metrics_) metrics_ = std::make_unique<gpu::DriverMetrics>(&registry_, kDriverName, "n");
    return metrics_.get();
  }
  CdDriver Driver() {
    return CdDriver(state_.get(), Metrics(),
                    {.deadline_margin = absl::ZeroDuration(),
                     .backoff = {.initial = absl::Milliseconds(5), .max = absl::Milliseconds(20)},
                     .clock = RealClock::Get()});
  }
  metrics::Registry registry_;
  std::unique_ptr<gpu::DriverMetrics> metrics_;
};

TEST_F(DriverTest, RetriesUntilReadyWithinTheCall) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready_after_calls = 4;
  CdDriver driver = Driver();
  auto out =
      driver.PrepareResourceClaims({.request_id = 1, .deadline = absl::Now() + absl::Seconds(10)},
                                   {ChannelClaim("c1", "user-ns", "cd-1")});
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(out->at("c1").status.ok()) << out->at("c1").status;
  EXPECT_EQ(api_.ready_calls, 4);
  EXPECT_THAT(registry_.Render(),
              HasSubstr("nvidia_dra_prepared_devices{node=\"n\",driver=\"compute-domain.nvidia."
                        "com\",device_type=\"channel\"} 1"));
}

TEST_F(DriverTest, GivesUpBeforeTheDeadlineWithTheLastError) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  const absl::Time start = absl::Now();
  auto out = driver.PrepareResourceClaims({.deadline = start + absl::Milliseconds(300)},
                                          {ChannelClaim("c1", "user-ns", "cd-1")});
  ASSERT_TRUE(out.ok());
  const absl::Status& s = out->at("c1").status;
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("not ready"));
  EXPECT_THAT(s.message(), HasSubstr("the kubelet retries"));
  EXPECT_GT(api_.ready_calls, 3);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

// A channel claim waiting for its daemon does not hold up the daemon claim's prepare, which
// the kubelet sends in another call at the same time.
TEST_F(DriverTest, AWaitingChannelClaimDoesNotBlockTheDaemonClaim) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto channel = std::async(std::launch::async, [&] {
    return driver.PrepareResourceClaims({.deadline = absl::Now() + absl::Seconds(20)},
                                        {ChannelClaim("c1", "user-ns", "cd-1")});
  });
  auto ready_calls = [&] {
    absl::MutexLock l(&api_.mu);
    return api_.ready_calls;
  };
  while (ready_calls() < 2) absl::SleepFor(absl::Milliseconds(5));  // in its retry loop
  const absl::Time start = absl::Now();
  auto daemon = driver.PrepareResourceClaims({.deadline = absl::Now() + absl::Seconds(20)},
                                             {DaemonClaim("d1", "cd-1")});
  ASSERT_TRUE(daemon.ok());
  EXPECT_TRUE(daemon->at("d1").status.ok()) << daemon->at("d1").status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(channel.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  {
    absl::MutexLock l(&api_.mu);
    api_.ready.insert("cd-1");  // the daemon reports Ready
  }
  auto result = channel.get();
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->at("c1").status.ok()) << result->at("c1").status;
}

TEST_F(DriverTest, ShutdownEndsWaitingPrepares) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto channel = std::async(std::launch::async, [&] {
    return driver.PrepareResourceClaims({.deadline = absl::Now() + absl::Seconds(30)},
                                        {ChannelClaim("c1", "user-ns", "cd-1")});
  });
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  driver.Shutdown();
  auto result = channel.get();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  ASSERT_TRUE(result.ok());
  EXPECT_THAT(result->at("c1").status.message(), HasSubstr("not ready"));
}

TEST_F(DriverTest, PermanentErrorsAreNotRetried) {
  api_.AddDomain("cd-1", "user-ns", "d");
  CdDriver driver = Driver();
  auto out = driver.PrepareResourceClaims(
      {.deadline = absl::Now() + absl::Seconds(10)},
      {ChannelClaim("c1", "wrong-ns", "cd-1"), DaemonClaim("d1", "cd-1")});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(out->at("c1").status.message(), HasSubstr("permanent error"));
  EXPECT_TRUE(out->at("d1").status.ok());  // the other claim of the call is unaffected
  EXPECT_EQ(api_.ready_calls, 0);
}

}  // namespace
}  // namespace dra::cdplugin
