// Replays every file of lib/checkpoint/fuzz_corpus/ through the fuzz entry point (see
// test/support/fuzz_corpus.h).

#include "test/support/fuzz_corpus.h"

namespace {

TEST(CheckpointFuzzCorpus, ReplaysEveryFile) {
  EXPECT_GE(dra::testing::ReplayFuzzCorpus("lib/checkpoint/fuzz_corpus"), 5)
      << "corpus missing or nearly empty";
}

}  // namespace
