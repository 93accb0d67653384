// TimeSlicing against the fake nvidia-smi and mock NVML of a mock driver root; the result is read
// back through `nvidia-smi -q` and `compute-policy -l`, i.e. from the mock's persisted state.

#include "lib/gpuplugin/timeslicing/time_slicing.h"

#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/doubles/testing/mock_driver_root.h"

namespace dra::gpu {
namespace {

using ::testing::HasSubstr;

class TimeSlicingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_path_ = tmp_.path() + "/root";
    ASSERT_TRUE(dra::testing::MakeMockDriverRoot("h100-8x", root_path_).ok());
    auto root = driverroot::DriverRoot::Create({.root = root_path_});
    ASSERT_TRUE(root.ok()) << root.status();
    root_ = std::move(*root);
    smi_ = std::make_unique<NvidiaSmi>(root_.get());
    auto list = smi_->Run({"-L"});
    ASSERT_TRUE(list.ok()) << list.status();
    std::regex uuid("GPU-[0-9a-f-]+");
    for (std::sregex_iterator it(list->begin(), list->end(), uuid), end; it != end; ++it) {
      uuids_.push_back(it->str());
    }
    ASSERT_EQ(uuids_.size(), 8u);
  }
  // "Compute Mode / Compute Timeslice" of one GPU from `nvidia-smi -q -i <uuid>`.
  std::pair<std::string, std::string> Settings(const std::string& uuid) {
    auto q = smi_->Run({"-q", "-i", uuid});
    EXPECT_TRUE(q.ok()) << q.status();
    std::smatch mode, slice;
    std::string text = q.value_or("");
    std::regex_search(text, mode, std::regex("Compute Mode +: (\\S+)"));
    std::regex_search(text, slice, std::regex("Compute Timeslice +: (\\S+)"));
    return {mode.size() > 1 ? mode[1].str() : "?", slice.size() > 1 ? slice[1].str() : "?"};
  }

  dra::testing::TempDir tmp_;
  std::string root_path_;
  std::unique_ptr<driverroot::DriverRoot> root_;
  std::unique_ptr<NvidiaSmi> smi_;
  std::vector<std::string> uuids_;
};

TEST_F(TimeSlicingTest, EachIntervalSetsItsValueAndComputeModeDefault) {
  struct Case {
    api::TimeSliceInterval interval;
    const char* listed;
  };
  const Case cases[] = {{api::TimeSliceInterval::kShort, "Short"},
                        {api::TimeSliceInterval::kMedium, "Medium"},
                        {api::TimeSliceInterval::kLong, "Long"},
                        {api::TimeSliceInterval::kDefault, "Default"}};
  TimeSlicing ts(smi_.get());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.listed);
    // Something else set an exclusive mode before; time-slicing needs DEFAULT.
    ASSERT_TRUE(smi_->Run({"-i", uuids_[2], "-c", "EXCLUSIVE_PROCESS"}).ok());
    ASSERT_TRUE(ts.Apply({uuids_[2], uuids_[5]}, c.interval).ok());
    EXPECT_EQ(Settings(uuids_[2]), std::make_pair(std::string("Default"), std::string(c.listed)));
    EXPECT_EQ(Settings(uuids_[5]), std::make_pair(std::string("Default"), std::string(c.listed)));
    auto listed = smi_->Run({"compute-policy", "-l"});
    ASSERT_TRUE(listed.ok());
    EXPECT_THAT(*listed, HasSubstr(std::string("GPU 2  Timeslice  ") + c.listed));
    // The other GPUs are untouched.
    EXPECT_THAT(*listed, HasSubstr("GPU 3  Timeslice  Default"));
  }
}

TEST_F(TimeSlicingTest, ResetRestoresDefault) {
  TimeSlicing ts(smi_.get());
  ASSERT_TRUE(ts.Apply({uuids_[0]}, api::TimeSliceInterval::kLong).ok());
  ASSERT_EQ(Settings(uuids_[0]).second, "Long");
  ASSERT_TRUE(ts.Reset({uuids_[0]}).ok());
  EXPECT_EQ(Settings(uuids_[0]), std::make_pair(std::string("Default"), std::string("Default")));
  EXPECT_TRUE(ts.Reset({uuids_[0]}).ok());  // idempotent
}

TEST_F(TimeSlicingTest, FailureNamesTheGpuAndStopsThere) {
  TimeSlicing ts(smi_.get());
  const std::string missing = "GPU-00000000-0000-0000-0000-000000000000";
  absl::Status s = ts.Apply({uuids_[1], missing, uuids_[4]}, api::TimeSliceInterval::kMedium);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("set time-slice Medium on GPU " + missing));
  EXPECT_THAT(std::string(s.message()), HasSubstr("exit code 6"));
  EXPECT_EQ(Settings(uuids_[1]).second, "Medium");
  EXPECT_EQ(Settings(uuids_[4]).second, "Default");
}

// For the parents of MIG devices: the interval alone; the compute mode stays what it was.
TEST_F(TimeSlicingTest, SetIntervalLeavesTheComputeModeAlone) {
  TimeSlicing ts(smi_.get());
  ASSERT_TRUE(smi_->Run({"-i", uuids_[1], "-c", "EXCLUSIVE_PROCESS"}).ok());
  const std::string mode = Settings(uuids_[1]).first;
  ASSERT_NE(mode, "Default");
  ASSERT_TRUE(ts.SetInterval({uuids_[1]}, api::TimeSliceInterval::kShort).ok());
  EXPECT_EQ(Settings(uuids_[1]), std::make_pair(mode, std::string("Short")));
  ASSERT_TRUE(ts.SetInterval({uuids_[1]}, api::TimeSliceInterval::kDefault).ok());
  EXPECT_EQ(Settings(uuids_[1]), std::make_pair(mode, std::string("Default")));
  // A failure names the GPU.
  absl::Status s =
      ts.SetInterval({"GPU-00000000-0000-0000-0000-000000000000"}, api::TimeSliceInterval::kLong);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("set time-slice Long on MIG parent GPU GPU-00000000-0000-0000-0000-"
                        "000000000000"));
}

}  // namespace
}  // namespace dra::gpu
