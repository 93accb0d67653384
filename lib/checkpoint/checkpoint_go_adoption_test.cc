// The checkpoint adopting the Go driver's checkpoint files (switching drivers on a live node):
// adopted, kept aside for a rollback, invalidated across a reboot, refused when corrupt, reported.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/checkpoint_test_fixture.h"
#include "lib/checkpoint/go_test_files.h"
#include "lib/common/atomic_file.h"

namespace dra::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Json = nlohmann::json;
using testing::CheckpointTest;

TEST_F(CheckpointTest, GoDriverCheckpointIsAdoptedAndKeptAsideForRollback) {
  MustOpen();
  const std::string go = testing_go::File(
      testing_go::V2Section("11111111-aaaa", {testing_go::GpuClaimV2("uid-1", "PrepareCompleted"),
                                              testing_go::StartedClaimV2("uid-2", "ns", "c2")}),
      testing_go::V1Section({testing_go::GpuClaimV1("uid-1")}));
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), go).ok());
  clock_.Advance(absl::Seconds(5));

  auto cp = MustOpen();
  ASSERT_NE(cp, nullptr);
  EXPECT_FALSE(cp->open_corruption().has_value());
  EXPECT_THAT(reports_, IsEmpty());
  ASSERT_TRUE(cp->open_adoption().has_value());
  const AdoptionReport& r = *cp->open_adoption();
  EXPECT_EQ(r.path, CheckpointPath());
  EXPECT_EQ(r.kept_at, CheckpointPath() + ".go-driver-1700000005");
  EXPECT_EQ(r.layout, "v2");
  EXPECT_EQ(r.claims, 2u);
  EXPECT_EQ(r.started, 1u);
  ASSERT_EQ(adoptions_.size(), 1u);
  EXPECT_EQ(*ReadFile(r.kept_at), go);  // byte for byte, for a rollback

  // Rewritten in our format, with the same claims.
  absl::StatusOr<Contents> on_disk = DecodeCheckpoint(*ReadFile(CheckpointPath()));
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->node_boot_id, "11111111-aaaa");
  ASSERT_EQ(on_disk->claims.size(), 2u);
  const PreparedClaim& done = on_disk->claims.at("uid-1");
  EXPECT_EQ(done.state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(done.allocation["devices"]["results"][0]["device"], "gpu-0");
  EXPECT_EQ(done.prepared_devices["go"][0]["configState"]["timeSliceApplied"], true);
  EXPECT_EQ(done.prepared_devices["allocationSeen"], true);
  const PreparedClaim& started = on_disk->claims.at("uid-2");
  EXPECT_EQ(started.state, ClaimState::kPrepareStarted);
  EXPECT_EQ(started.namespace_name, "ns");
  EXPECT_EQ(started.name, "c2");
  EXPECT_TRUE(started.prepared_devices.is_null());

  // Read again: ours now, nothing more to adopt.
  adoptions_.clear();
  auto again = MustOpen();
  EXPECT_FALSE(again->open_adoption().has_value());
  EXPECT_EQ(again->List()->size(), 2u);
  EXPECT_THAT(adoptions_, IsEmpty());
}

TEST_F(CheckpointTest, GoDriverV1OnlyCheckpointIsAdoptedWithTheCurrentBootId) {
  MustOpen();
  ASSERT_TRUE(WriteFileAtomically(
                  CheckpointPath(),
                  testing_go::File("", testing_go::V1Section({testing_go::GpuClaimV1("uid-1")})))
                  .ok());
  auto cp = MustOpen();
  ASSERT_TRUE(cp->open_adoption().has_value());
  EXPECT_EQ(cp->open_adoption()->layout, "v1");
  EXPECT_EQ(cp->claims_invalidated_by_reboot(), 0u);
  absl::StatusOr<ClaimMap> claims = cp->List();
  ASSERT_EQ(claims->size(), 1u);
  EXPECT_EQ(claims->at("uid-1").state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(DecodeCheckpoint(*ReadFile(CheckpointPath()))->node_boot_id, "11111111-aaaa");
}

TEST_F(CheckpointTest, GoDriverCheckpointOfAnEarlierBootIsAdoptedThenInvalidated) {
  MustOpen();
  ASSERT_TRUE(
      WriteFileAtomically(
          CheckpointPath(),
          testing_go::File(testing_go::V2Section(
                               "old-boot", {testing_go::GpuClaimV2("uid-1", "PrepareCompleted")}),
                           testing_go::V1Section({testing_go::GpuClaimV1("uid-1")})))
          .ok());
  auto cp = MustOpen();
  ASSERT_TRUE(cp->open_adoption().has_value());
  EXPECT_EQ(cp->claims_invalidated_by_reboot(), 1u);
  EXPECT_THAT(*cp->List(), IsEmpty());
}

TEST_F(CheckpointTest, GoDriverCheckpointWithABadChecksumOrDevicesIsCorrupt) {
  MustOpen();
  const std::string good = testing_go::File(
      testing_go::V2Section("11111111-aaaa", {testing_go::StartedClaimV2("uid-2", "ns", "c2")}),
      "");
  const std::string tampered = absl::StrReplaceAll(good, {{"\"c2\"", "\"c9\""}});
  const std::string unconvertible = testing_go::File(
      testing_go::V2Section("11111111-aaaa",
                            {testing_go::GpuClaimV2("unconvertible", "PrepareCompleted")}),
      "");
  for (const auto& [text, reason] :
       {std::pair{tampered, std::string("v2 checksum mismatch")},
        std::pair{unconvertible, std::string("no such device type")}}) {
    reports_.clear();
    ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), text).ok());
    clock_.Advance(absl::Seconds(1));
    auto cp = MustOpen();
    ASSERT_NE(cp, nullptr);
    EXPECT_FALSE(cp->open_adoption().has_value());
    ASSERT_TRUE(cp->open_corruption().has_value());
    EXPECT_THAT(cp->open_corruption()->reason, HasSubstr(reason));
    EXPECT_EQ(*ReadFile(cp->open_corruption()->moved_to), text);
    EXPECT_THAT(*cp->List(), IsEmpty());
  }
  EXPECT_THAT(adoptions_, IsEmpty());

  // Without a converter a valid Go file cannot be adopted either.
  options_.convert_go_devices = nullptr;
  ASSERT_TRUE(WriteFileAtomically(CheckpointPath(), good).ok());
  clock_.Advance(absl::Seconds(1));
  auto cp = MustOpen();
  EXPECT_FALSE(cp->open_adoption().has_value());
  EXPECT_TRUE(cp->open_corruption().has_value());
}

TEST_F(CheckpointTest, GoDriverCheckpointFoundByUpdateIsAdoptedAndReported) {
  auto cp = MustOpen();
  ASSERT_TRUE(
      WriteFileAtomically(
          CheckpointPath(),
          testing_go::File(testing_go::V2Section("11111111-aaaa",
                                                 {testing_go::StartedClaimV2("uid-2", "ns", "c2")}),
                           ""))
          .ok());
  ASSERT_TRUE(Put(*cp, Claim("u1", ClaimState::kPrepareStarted)).ok());
  ASSERT_EQ(adoptions_.size(), 1u);
  EXPECT_THAT(reports_, IsEmpty());
  absl::StatusOr<ClaimMap> claims = cp->List();
  ASSERT_TRUE(claims.ok());
  EXPECT_EQ(claims->size(), 2u);
  EXPECT_TRUE(claims->contains("uid-2"));
}

TEST_F(CheckpointTest, KeepsOnlyTheNewestThreeGoDriverCopies) {
  MustOpen();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(WriteFileAtomically(
                    CheckpointPath(),
                    testing_go::File(testing_go::V2Section(absl::StrCat("boot-", i), {}), ""))
                    .ok());
    clock_.Advance(absl::Seconds(10));
    ASSERT_NE(MustOpen(), nullptr);
  }
  WaitForBackgroundUnlinks();  // the replaced files' hidden links
  EXPECT_THAT(DirEntries(), ElementsAre("checkpoint.json", "checkpoint.json.go-driver-1700000020",
                                        "checkpoint.json.go-driver-1700000030",
                                        "checkpoint.json.go-driver-1700000040", "cp.lock"));
}

}  // namespace
}  // namespace dra::checkpoint
