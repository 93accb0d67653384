// The compute-domain prepare as steps on lib/prepare (claim_steps.h): what is recorded, retried
// prepares, records written before steps were recorded, and the conflict check in the first
// checkpoint write.

#include "lib/cdplugin/claim_steps.h"

#include <algorithm>

#include "lib/cdplugin/device_state_test_fixture.h"

namespace dra::cdplugin {
namespace {

using prepare::StepRecord;
using prepare::StepState;
using StepsTest = DeviceStateTest;

constexpr StepState kBegun = StepState::kBegun;
constexpr StepState kApplied = StepState::kApplied;

// The claim's recorded steps as the checkpoint holds them (empty when none).
std::vector<StepRecord> StepsOf(const checkpoint::Checkpoint& cp, const std::string& uid) {
  auto c = cp.Get(uid);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok() || !c->has_value() || (*c)->steps.is_null()) return {};
  auto steps = prepare::StepRecordsFromJson((*c)->steps);
  EXPECT_TRUE(steps.ok()) << steps.status();
  return steps.ok() ? *steps : std::vector<StepRecord>();
}

StepRecord Label(const std::string& domain, StepState state) {
  return {kNodeLabelStep, state, {{"domain", domain}}};
}

TEST_F(StepsTest, ChannelClaimRecordsLabelChannelAndSpec) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  EXPECT_THAT(StepsOf(*checkpoint_, "c1"),
              ElementsAre(Label("cd-1", kApplied), StepRecord{kChannelStep, kApplied, nullptr},
                          StepRecord{kCdiSpecStep, kApplied, nullptr}));
}

TEST_F(StepsTest, DaemonClaimRecordsImexConfigAndSpec) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_TRUE(state_->Prepare(DaemonClaim("d1", "cd-1")).ok());
  EXPECT_THAT(StepsOf(*checkpoint_, "d1"),
              ElementsAre(StepRecord{kImexConfigStep, kApplied, nullptr},
                          StepRecord{kCdiSpecStep, kApplied, nullptr}));
}

TEST_F(StepsTest, RetriedPrepareAfterAFailedReadinessKeepsTheLabel) {
  api_.AddDomain("cd-1", "user-ns", "d");
  auto first = state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1"));
  ASSERT_FALSE(first.ok());
  EXPECT_FALSE(IsPermanent(first.status()));
  EXPECT_THAT(first.status().message(), HasSubstr("claim user-ns/claim-c1, device channel-0"));
  EXPECT_THAT(first.status().message(), HasSubstr("is not Ready yet"));
  // The label was set and stays recorded for the retry (or the unprepare).
  EXPECT_EQ(api_.label, "cd-1");
  EXPECT_EQ(PhaseOf("c1"), Phase::kStarted);
  EXPECT_THAT(StepsOf(*checkpoint_, "c1"), ElementsAre(Label("cd-1", kBegun)));

  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  EXPECT_EQ(api_.label, "cd-1");
  EXPECT_EQ(api_.label_removals, 0);  // kept, not undone and set again
  EXPECT_EQ(PhaseOf("c1"), Phase::kCompleted);
  EXPECT_EQ(StepsOf(*checkpoint_, "c1").size(), 3u);
}

TEST_F(StepsTest, ConflictIsCheckedInTheStartedWriteAndChangesNothing) {
  api_.AddDomain("cd-1", "user-ns", "d");
  // c2 half-prepared (its daemon not ready): recorded with the label step.
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1")).ok());
  const std::vector<StepRecord> c2_steps = StepsOf(*checkpoint_, "c2");
  ASSERT_THAT(c2_steps, ElementsAre(Label("cd-1", kBegun)));
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  api_.label.clear();
  const int ready_calls = api_.ready_calls;

  auto retry = state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1"));
  ASSERT_FALSE(retry.ok());
  EXPECT_FALSE(IsPermanent(retry.status()));
  EXPECT_EQ(retry.status().message(),
            "channel 0 already allocated by claim c1 (according to checkpoint); requested device "
            "channel-0 is already allocated to a different claim");
  // No step ran, nothing was undone, and c2's record is as it was.
  EXPECT_EQ(api_.label, "");
  EXPECT_EQ(api_.ready_calls, ready_calls);
  EXPECT_EQ(api_.label_removals, 0);
  EXPECT_EQ(PhaseOf("c2"), Phase::kStarted);
  EXPECT_EQ(StepsOf(*checkpoint_, "c2"), c2_steps);

  // A claim not recorded before gets no entry.
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c3", "user-ns", "cd-1")).ok());
  EXPECT_EQ(PhaseOf("c3"), std::nullopt);
}

// A record written before steps were recorded ("steps" absent), as the previous version wrote it.
void DropSteps(checkpoint::Checkpoint& cp, const std::string& uid) {
  ASSERT_TRUE(cp.Update([&](checkpoint::ClaimMap& m) {
                  m.at(uid).steps = nullptr;
                  return absl::OkStatus();
                }).ok());
}

TEST_F(StepsTest, LegacyCompletedRecordIsUnprepared) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  DropSteps(*checkpoint_, "c1");
  ASSERT_EQ(api_.label, "cd-1");
  ASSERT_TRUE(fs::exists(SpecPath("c1")));
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(api_.label, "");
  EXPECT_EQ(api_.label_removals, 1);
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  EXPECT_EQ(PhaseOf("c1"), std::nullopt);
}

TEST_F(StepsTest, LegacyStartedRecordIsUnpreparedOrFinished) {
  api_.AddDomain("cd-1", "user-ns", "d");
  ASSERT_FALSE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  DropSteps(*checkpoint_, "c1");
  ASSERT_EQ(api_.label, "cd-1");
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(api_.label, "");
  EXPECT_EQ(PhaseOf("c1"), Phase::kAborted);

  ASSERT_FALSE(state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1")).ok());
  DropSteps(*checkpoint_, "c2");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c2", "user-ns", "cd-1")).ok());
  EXPECT_EQ(api_.label, "cd-1");
  EXPECT_EQ(PhaseOf("c2"), Phase::kCompleted);
  EXPECT_EQ(StepsOf(*checkpoint_, "c2").size(), 3u);
}

TEST(LegacyStepsTest, DerivedFromTheRecordedDevices) {
  const std::vector<RecordedDevice> devices = {
      {.kubelet = {.device_name = "channel-0"}, .type = DeviceType::kChannel, .domain_id = "cd-1"},
      {.kubelet = {.device_name = "daemon-0"}, .type = DeviceType::kDaemon, .domain_id = "cd-2"}};
  EXPECT_THAT(LegacySteps(devices, /*completed=*/true, /*host_managed=*/false),
              ElementsAre(Label("cd-1", kApplied), StepRecord{kChannelStep, kApplied, nullptr},
                          StepRecord{kImexConfigStep, kApplied, nullptr},
                          StepRecord{kCdiSpecStep, kApplied, nullptr}));
  // hostManaged sets no label.
  EXPECT_THAT(LegacySteps(devices, /*completed=*/false, /*host_managed=*/true),
              ElementsAre(StepRecord{kChannelStep, kBegun, nullptr},
                          StepRecord{kImexConfigStep, kBegun, nullptr},
                          StepRecord{kCdiSpecStep, kBegun, nullptr}));
}

TEST_F(StepsTest, AFailedLabelRemovalLeavesThePreparedClaimWhole) {
  api_.AddDomain("cd-1", "user-ns", "d");
  api_.ready.insert("cd-1");
  ASSERT_TRUE(state_->Prepare(ChannelClaim("c1", "user-ns", "cd-1")).ok());
  const std::vector<StepRecord> steps = StepsOf(*checkpoint_, "c1");
  // An undo that cannot be read fails; the claim stays as it was, spec included.
  ASSERT_TRUE(checkpoint_
                  ->Update([&](checkpoint::ClaimMap& m) {
                    m.at("c1").steps[0]["undo"] = "bogus";
                    return absl::OkStatus();
                  })
                  .ok());
  auto failed = state_->Unprepare("c1");
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("claim c1: step nodeLabel: undo data"));
  EXPECT_EQ(PhaseOf("c1"), Phase::kCompleted);
  EXPECT_TRUE(fs::exists(SpecPath("c1")));
  EXPECT_EQ(api_.label, "cd-1");
  // Repaired, the retried unprepare finishes.
  ASSERT_TRUE(checkpoint_
                  ->Update([&](checkpoint::ClaimMap& m) {
                    m.at("c1").steps = prepare::StepRecordsToJson(steps);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(state_->Unprepare("c1").ok());
  EXPECT_EQ(api_.label, "");
  EXPECT_FALSE(fs::exists(SpecPath("c1")));
  EXPECT_EQ(PhaseOf("c1"), std::nullopt);
}

TEST(CdStepTableTest, NamesUniqueAndEveryRecordedNameHasAnUndoer) {
  EXPECT_TRUE(prepare::CheckStepTable(CdStepTable()).ok());
  const StepEnv env;
  const prepare::StepUndoers undoers = ClaimUndoers(env, "c1");
  const std::vector<RecordedDevice> devices = {
      {.kubelet = {.device_name = "channel-0"}, .type = DeviceType::kChannel, .domain_id = "cd-1"},
      {.kubelet = {.device_name = "daemon-0"}, .type = DeviceType::kDaemon, .domain_id = "cd-1"}};
  for (const StepRecord& r : LegacySteps(devices, /*completed=*/true, /*host_managed=*/false)) {
    EXPECT_EQ(undoers.count(r.name), 1u) << r.name;
  }
}

TEST(CdStepTableTest, MarkdownHasOneRowPerKind) {
  const std::string md = CdStepTableMarkdown();
  EXPECT_THAT(md, HasSubstr("| Step | In the plan | External | Resumable | Best effort |"));
  EXPECT_THAT(md, HasSubstr("| `nodeLabel` | per channel device, `--imex-mode=driverManaged` | "
                            "yes | yes | no |"));
  EXPECT_THAT(md, HasSubstr("| `cdiSpec` | always | no | yes | no |"));
  EXPECT_EQ(static_cast<size_t>(std::count(md.begin(), md.end(), '\n')), 2 + CdStepTable().size());
}

TEST_F(StepsTest, PlannedStepsAreWhatTheTableSays) {
  api_.AddDomain("cd-1", "driver-ns", "d");
  const StepEnv env{.host_imex = nullptr};
  ClaimPlan plan;
  ASSERT_TRUE(PlanClaimSteps({.uid = "c1",
                              .ref = "driver-ns/claim-c1",
                              .devices = {{.kubelet = {.device_name = "channel-0"},
                                           .type = DeviceType::kChannel,
                                           .domain_id = "cd-1"},
                                          {.kubelet = {.device_name = "daemon-0"},
                                           .type = DeviceType::kDaemon,
                                           .domain_id = "cd-1"}},
                              .channel_domains = {{"cd-1", api_.FindDomain("cd-1")}}},
                             env, &plan)
                  .ok());
  std::vector<std::string> names;
  for (const auto& step : plan.steps) {
    names.push_back(step->name());
    bool found = false;
    for (const CdStepKind& kind : CdStepTable()) {
      if (kind.names[0] != step->name()) continue;
      found = true;
      EXPECT_EQ(step->external(), kind.doc.external) << step->name();
      EXPECT_EQ(step->resumable(), kind.doc.resumable) << step->name();
      EXPECT_EQ(step->best_effort(), kind.doc.best_effort) << step->name();
    }
    EXPECT_TRUE(found) << step->name();
  }
  EXPECT_THAT(names, ElementsAre(kNodeLabelStep, kChannelStep, kImexConfigStep, kCdiSpecStep));
}

}  // namespace
}  // namespace dra::cdplugin
