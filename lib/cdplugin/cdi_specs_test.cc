// The claims' CDI specs after a reboot (cdi_specs.h RemoveClaimSpecsOnReboot): they go with the
// checkpoint's records, the base spec stays.

#include "lib/cdplugin/cdi_specs.h"

#include "lib/cdplugin/device_state_test_fixture.h"

namespace dra::cdplugin {
namespace {

class CdiSpecsRebootTest : public DeviceStateTest {
 protected:
  // A record for `uid` in the checkpoint and a spec of its channel, as a prepare leaves them.
  void Prepared(const std::string& uid) {
    ASSERT_TRUE(checkpoint_
                    ->Update([&](checkpoint::ClaimMap& claims) {
                      claims[uid].state = checkpoint::ClaimState::kPrepareCompleted;
                      return absl::OkStatus();
                    })
                    .ok());
    ASSERT_TRUE(cdi_->WriteClaimSpec(uid, {{"channel-0", ChannelEdits(7, 1)}}).ok());
    ASSERT_TRUE(fs::exists(SpecPath(uid)));
  }
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> OpenAsThePluginDoes() {
    checkpoint::CheckpointOptions options;
    options.on_reboot = RemoveClaimSpecsOnReboot(cdi_.get());
    return checkpoint::Checkpoint::Open(plugin_dir(), tmp_.path() + "/boot_id", options);
  }
};

TEST_F(CdiSpecsRebootTest, AfterARebootTheClaimSpecsGoAndTheBaseSpecStays) {
  auto base = cdi_->WriteBaseSpec(*root_);
  ASSERT_TRUE(base.ok()) << base.status();
  Prepared("c1");
  Prepared("c2");
  // A spec without a record (a crash between writing it and the checkpoint) goes too.
  ASSERT_TRUE(cdi_->WriteClaimSpec("c3", {{"channel-0", ChannelEdits(7, 1)}}).ok());

  // The plugin restarts in the same boot: everything stays.
  auto same = OpenAsThePluginDoes();
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ((*same)->List()->size(), 2u);
  EXPECT_TRUE(fs::exists(SpecPath("c1")) && fs::exists(SpecPath("c2")) &&
              fs::exists(SpecPath("c3")));

  ASSERT_TRUE(WriteFileAtomically(tmp_.path() + "/boot_id", "boot-2\n").ok());
  auto rebooted = OpenAsThePluginDoes();
  ASSERT_TRUE(rebooted.ok()) << rebooted.status();
  EXPECT_EQ((*rebooted)->claims_invalidated_by_reboot(), 2u);
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  EXPECT_FALSE(fs::exists(SpecPath("c2")));
  EXPECT_FALSE(fs::exists(SpecPath("c3")));
  EXPECT_TRUE(fs::exists(*base));
}

}  // namespace
}  // namespace dra::cdplugin
