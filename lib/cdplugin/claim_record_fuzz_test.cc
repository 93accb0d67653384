// Replays lib/cdplugin/fuzz_corpus/claim_records/ through the claim records fuzz target
// (fuzz_targets.h), then a fixed-seed mutation run over it (test/support/fuzz_corpus.h). A crash,
// an exception or an invariant violation aborts this test. For a longer local run:
//   DRA_FUZZ_ITERATIONS=1000000 DRA_FUZZ_SEED=7 build/check/lib/cdplugin/cdplugin_fuzz_replay_test

#include "gtest/gtest.h"
#include "lib/cdplugin/fuzz_targets.h"
#include "lib/cdplugin/prepared_claim.h"
#include "lib/common/json_access.h"
#include "test/support/fuzz_corpus.h"

namespace dra::cdplugin::fuzz {
namespace {

TEST(CdpluginClaimRecordsFuzzTest, CorpusAndMutations) {
  dra::testing::FuzzReplay replay;
  replay.corpus = "lib/cdplugin/fuzz_corpus/claim_records";
  replay.tokens = {"null",
                   "true",
                   "0",
                   "-1",
                   "2147483648",
                   "1e400",
                   "\"\"",
                   "{}",
                   "[]",
                   ",",
                   ":",
                   "\"PrepareAborted\"",
                   "\"PrepareCompleted\"",
                   "\"channel\"",
                   "\"daemon\"",
                   "\"abortedAt\"",
                   "\"2026-11-29T12:00:00.123456789Z\"",
                   "\"infinite-future\"",
                   "\"id\""};
  dra::testing::ReplayAndMutate(replay, ClaimRecords);
}

// The valid seeds must stay valid, or the corpus stops reaching the decoder's inner fields.
TEST(CdpluginClaimRecordsFuzzTest, ValidSeedsDecode) {
  int with_devices = 0, aborted = 0;
  for (const std::string& s :
       dra::testing::ReadFuzzCorpus("lib/cdplugin/fuzz_corpus/claim_records")) {
    checkpoint::PreparedClaim claim{.uid = "u"};
    claim.prepared_devices = json_access::Parse(s).value_or(nlohmann::json());
    absl::StatusOr<ClaimRecord> r = DecodeRecord(claim);
    if (!r.ok()) continue;
    if (!r->devices.empty()) ++with_devices;
    if (r->phase == Phase::kAborted) ++aborted;
  }
  EXPECT_GE(with_devices, 2);  // started_channel, completed_all
  EXPECT_GE(aborted, 3);       // aborted, aborted_bad_time, aborted_extreme_time
}

}  // namespace
}  // namespace dra::cdplugin::fuzz
