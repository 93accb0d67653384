// Replays every file of lib/cdi/fuzz_corpus/ through the fuzz entry point (see
// test/support/fuzz_corpus.h).

#include "test/support/fuzz_corpus.h"

namespace {

TEST(CdiSpecFuzzCorpus, ReplaysEveryFile) {
  EXPECT_GE(dra::testing::ReplayFuzzCorpus("lib/cdi/fuzz_corpus"), 5)
      << "corpus missing or nearly empty";
}

}  // namespace
