#include "lib/common/trace.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/log.h"

namespace dra {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetSink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override { log::SetSink(nullptr); }
  std::vector<std::string> lines_;
};

TEST_F(TraceTest, LogsStagesInFirstRunOrderWithCountsAndNotes) {
  {
    CallTrace trace("prepare trace", true);
    EXPECT_TRUE(CallTrace::Active());
    { TraceStage s("claimFetch"); }
    for (int i = 0; i < 2; ++i) {
      TraceStage s("checkpointWrite");
      absl::SleepFor(absl::Milliseconds(2));
    }
    trace.Note("claims", 3);
    CallTrace::CountInCurrent("hits");
    CallTrace::CountInCurrent("hits", 2);
  }
  EXPECT_FALSE(CallTrace::Active());
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_THAT(lines_[0], HasSubstr("\"prepare trace\" totalUs="));
  EXPECT_THAT(lines_[0],
              ContainsRegex("claimFetchUs=[0-9]+ checkpointWriteUs=([0-9]+) checkpointWriteN=2 "
                            "claims=3 hits=3"));
  // Two sleeps of 2 ms: at least 4000 us in the stage.
  const size_t at = lines_[0].find("checkpointWriteUs=");
  EXPECT_GE(std::stol(lines_[0].substr(at + 18)), 4000);
  EXPECT_THAT(lines_[0], Not(HasSubstr("claimFetchN=")));
}

TEST_F(TraceTest, DisabledTraceLogsNothingAndStagesOutsideATraceAreIgnored) {
  { TraceStage s("outside"); }
  {
    CallTrace trace("prepare trace", false);
    EXPECT_FALSE(CallTrace::Active());
    TraceStage s("inside");
  }
  EXPECT_THAT(lines_, IsEmpty());
}

TEST_F(TraceTest, InnerTraceGetsItsStagesAndTheOuterOneIsRestored) {
  {
    CallTrace outer("outer", true);
    {
      CallTrace inner("inner", true);
      TraceStage s("a");
    }
    TraceStage s("b");
  }
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_THAT(lines_[0], HasSubstr("\"inner\""));
  EXPECT_THAT(lines_[0], HasSubstr(" aUs="));
  EXPECT_THAT(lines_[1], HasSubstr("\"outer\""));
  EXPECT_THAT(lines_[1], HasSubstr(" bUs="));
  EXPECT_THAT(lines_[1], Not(HasSubstr(" aUs=")));
}

}  // namespace
}  // namespace dra
