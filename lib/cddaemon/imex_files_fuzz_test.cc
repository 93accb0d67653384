// Replays lib/cddaemon/fuzz_corpus/imex_files/ through the IMEX files fuzz target
// (fuzz_targets.h), then a fixed-seed mutation run over it (test/support/fuzz_corpus.h). A crash,
// an exception or an invariant violation aborts this test. For a longer local run:
//   DRA_FUZZ_ITERATIONS=1000000 DRA_FUZZ_SEED=7 build/check/lib/cddaemon/cddaemon_fuzz_replay_test

#include "gtest/gtest.h"
#include "lib/cddaemon/fuzz_targets.h"
#include "test/support/fuzz_corpus.h"

namespace dra::cddaemon::fuzz {
namespace {

TEST(CddaemonImexFilesFuzzTest, CorpusAndMutations) {
  dra::testing::FuzzReplay replay;
  replay.corpus = "lib/cddaemon/fuzz_corpus/imex_files";
  replay.tokens = {"\n",
                   "\r\n",
                   "\t",
                   "{{",
                   "}}",
                   "{{ .IMEXCmdBindInterfaceIP }}",
                   "{{ .IMEXDaemonNodesConfigPath }}",
                   "compute-domain-daemon-",
                   "# BEGIN compute-domain-daemon mappings (maintained by compute-domain-daemon)",
                   "# END compute-domain-daemon mappings",
                   "# Compute Domain Daemon mappings",
                   "\"ipAddress\":\"10.0.0.5\",",
                   "\"index\":2,",
                   "\"cliqueID\":\"u.7\",",
                   "\\n",
                   "0",
                   "-1"};
  dra::testing::ReplayAndMutate(replay, ImexFiles);
}

}  // namespace
}  // namespace dra::cddaemon::fuzz
