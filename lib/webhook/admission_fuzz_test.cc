// Replays lib/webhook/fuzz_corpus/ through the fuzz entry point (admission_fuzz.cc), then a short
// fixed-seed mutation run over it. A crash or an invariant violation aborts this test.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/support/build_paths.h"
#include "test/support/fuzz_corpus.h"

namespace {

int FuzzOne(const std::string& data) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
}

// The seeds to mutate: all but the deep-nesting ones (20 KB of brackets each, which
// EveryCorpusFileRuns replays; mutating them made this test five times slower and, under ASan,
// longer than its timeout, for edits that mostly land among the brackets).
std::vector<std::string> Seeds() {
  constexpr uintmax_t kMaxSeedBytes = 16 << 10;
  std::vector<std::string> seeds;
  auto dir = std::filesystem::path(dra::testing::SourceDir()) / "lib/webhook/fuzz_corpus";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.file_size() > kMaxSeedBytes) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    seeds.push_back(buf.str());
  }
  return seeds;
}

TEST(WebhookFuzzReplayTest, EveryCorpusFileRuns) {
  EXPECT_GE(dra::testing::ReplayFuzzCorpus("lib/webhook/fuzz_corpus"), 10);
}

TEST(WebhookFuzzReplayTest, EdgeInputs) {
  for (const std::string& data : {std::string(), std::string("\0", 1), std::string(1 << 16, '{'),
                                  std::string(1 << 16, '['), std::string("\"\\\"")}) {
    EXPECT_EQ(FuzzOne(data), 0);
  }
}

TEST(WebhookFuzzReplayTest, DeterministicMutations) {
  std::vector<std::string> seeds = Seeds();
  ASSERT_FALSE(seeds.empty());
  const std::vector<std::string> tokens = {"null",
                                           "true",
                                           "0",
                                           "\"\"",
                                           "{}",
                                           "[]",
                                           "\"MPS\"",
                                           "\"TimeSlicing\"",
                                           "\"gpu.nvidia.com\"",
                                           "\"config\"",
                                           "\"opaque\"",
                                           "\"parameters\"",
                                           "\"kind\"",
                                           "\"DELETE\"",
                                           ",",
                                           ":",
                                           "\"\\u006b\""};
  std::mt19937 rng(20261122);
  for (int i = 0; i < 5000; ++i) {
    std::string data = seeds[rng() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      size_t pos = data.empty() ? 0 : rng() % (data.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (!data.empty()) data[pos % data.size()] = static_cast<char>(rng());
          break;
        case 1:
          data.insert(pos, tokens[rng() % tokens.size()]);
          break;
        case 2:
          data.erase(pos, rng() % 8);
          break;
      }
    }
    ASSERT_EQ(FuzzOne(data), 0);
  }
}

}  // namespace
