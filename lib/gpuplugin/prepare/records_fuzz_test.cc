// Replays lib/gpuplugin/prepare/fuzz_corpus/records/ through the checkpoint records fuzz target
// (fuzz_targets.h), then a fixed-seed mutation run over it (test/support/fuzz_corpus.h). A crash,
// an exception or an invariant violation aborts this test. For a longer local run:
//   DRA_FUZZ_ITERATIONS=1000000 DRA_FUZZ_SEED=7
//   build/check/lib/gpuplugin/prepare/gpu_fuzz_replay_test

#include "gtest/gtest.h"
#include "lib/common/json_access.h"
#include "lib/gpuplugin/prepare/fuzz_targets.h"
#include "lib/gpuplugin/record/prepared.h"
#include "lib/prepare/plan.h"
#include "test/support/fuzz_corpus.h"

namespace dra::gpu::fuzz {
namespace {

TEST(GpuCheckpointRecordsFuzzTest, CorpusAndMutations) {
  dra::testing::FuzzReplay replay;
  replay.corpus = "lib/gpuplugin/prepare/fuzz_corpus/records";
  replay.tokens = {"null",
                   "true",
                   "0",
                   "-1",
                   "1e30",
                   "4294967296",
                   "\"\"",
                   "{}",
                   "[]",
                   ",",
                   ":",
                   "\"applied\"",
                   "\"begun\"",
                   "\"undo\"",
                   "\"mig\"",
                   "\"minor\"",
                   "\"mpsDaemon\"",
                   "\"busId\"",
                   "\"generation\"",
                   "\"devices\""};
  dra::testing::ReplayAndMutate(replay, CheckpointRecords);
}

// The valid seeds must stay valid, or the corpus stops reaching the decoders' inner fields.
TEST(GpuCheckpointRecordsFuzzTest, ValidSeedsDecode) {
  auto parse = [](const std::string& text) {
    return json_access::Parse(text).value_or(nlohmann::json());
  };
  std::vector<std::string> seeds =
      dra::testing::ReadFuzzCorpus("lib/gpuplugin/prepare/fuzz_corpus/records");
  int prepared = 0, steps = 0;
  for (const std::string& s : seeds) {
    absl::StatusOr<std::vector<RecordedDevice>> p = PreparedDevicesFromJson(parse(s));
    if (p.ok() && !p->empty()) ++prepared;
    absl::StatusOr<std::vector<prepare::StepRecord>> r = prepare::StepRecordsFromJson(parse(s));
    if (r.ok() && r->size() > 1) ++steps;
  }
  EXPECT_GE(prepared, 3);  // prepared_gpu_mps, prepared_mig, prepared_vfio
  EXPECT_GE(steps, 1);     // steps_all_kinds
}

// A number that does not fit the unsigned 32-bit fields is refused, not converted (a float out of
// range was undefined behaviour; UBSan stopped the fuzz target on seed prepared_minor_float.json).
TEST(GpuCheckpointRecordsFuzzTest, PreparedDeviceNumbersOutOfRangeAreRefused) {
  const nlohmann::json valid = nlohmann::json::parse(R"([{"requests":["r"],"pool":"p",
      "device":"gpu-0-mig","cdiDeviceIDs":[],"type":"mig","uuid":"MIG-1","minor":1,
      "mig":{"uuid":"MIG-1","parentUUID":"GPU-1","parentMinor":1,"parentPCIBusID":"",
             "profile":"1g.5gb","giProfileID":19,"placementStart":0,"placementSize":1,"giID":7,
             "ciID":0}}])");
  ASSERT_TRUE(PreparedDevicesFromJson(valid).ok());
  for (const nlohmann::json& bad : {nlohmann::json(1e30), nlohmann::json(-1), nlohmann::json(1.5),
                                    nlohmann::json(4294967296), nlohmann::json("1")}) {
    nlohmann::json j = valid;
    j[0]["minor"] = bad;
    absl::StatusOr<std::vector<RecordedDevice>> d = PreparedDevicesFromJson(j);
    EXPECT_FALSE(d.ok()) << "minor " << bad.dump();
    j = valid;
    j[0]["mig"]["giProfileID"] = bad;
    d = PreparedDevicesFromJson(j);
    EXPECT_FALSE(d.ok()) << "mig.giProfileID " << bad.dump();
  }
  nlohmann::json max = valid;
  max[0]["minor"] = 4294967295u;
  absl::StatusOr<std::vector<RecordedDevice>> d = PreparedDevicesFromJson(max);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)[0].minor, 4294967295u);
}

}  // namespace
}  // namespace dra::gpu::fuzz
