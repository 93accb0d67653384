// Replays every file of lib/api/fuzz_corpus/ through the fuzz entry point, so CI checks the
// corpus without clang's fuzzer runtime. A crash or an invariant violation aborts this test.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/api/config_fuzz.h"
#include "test/support/build_paths.h"
#include "test/support/fuzz_corpus.h"

namespace {

std::filesystem::path CorpusDir() {
  return std::filesystem::path(dra::testing::SourceDir()) / "lib" / "api" / "fuzz_corpus";
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

int FuzzOne(const std::string& data) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
}

TEST(ApiConfigFuzzReplayTest, EveryCorpusFileRuns) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(CorpusDir())) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  ASSERT_GE(files.size(), 20u) << "corpus missing at " << CorpusDir();
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    EXPECT_EQ(FuzzOne(ReadFile(file)), 0);
  }
}

TEST(ApiConfigFuzzReplayTest, EdgeInputs) {
  for (const std::string& data :
       {std::string(), std::string("\0", 1), std::string(1 << 16, '{'), std::string(1 << 16, '['),
        std::string("{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\","
                    "\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{"
                    "\"defaultPinnedDeviceMemoryLimit\":\"9223372036854775807\","
                    "\"defaultPerDevicePinnedMemoryLimit\":{\"-0\":\"8Ei\",\"1\":\"1Mi\"}}}}")}) {
    EXPECT_EQ(FuzzOne(data), 0);
  }
}

// A fixed-seed mutation run over the corpus: not a replacement for the fuzzer, but it keeps CI
// exploring a little past the corpus on every run, deterministically. For a longer local run:
//   DRA_API_FUZZ_ITERATIONS=1000000 DRA_API_FUZZ_SEED=7
//   build/check/lib/api/api_config_fuzz_replay_test
TEST(ApiConfigFuzzReplayTest, DeterministicMutations) {
  std::vector<std::string> seeds;
  for (const auto& entry : std::filesystem::directory_iterator(CorpusDir())) {
    if (entry.is_regular_file()) seeds.push_back(ReadFile(entry.path()));
  }
  ASSERT_FALSE(seeds.empty());
  // clang-format off
  const std::vector<std::string> tokens = {
      "null", "true", "0", "-1", "1e400", "18446744073709551616", "\"\"", "{}", "[]", "\"MPS\"",
      "\"TimeSlicing\"", "\"Default\"", "\"1Ki\"", "\"8Ei\"", "\"0\"", "\"-1\"", "\"GPU-a\"",
      "\"sharing\"", "\"mpsConfig\"", "\"timeSlicingConfig\"", "\"interval\"", "\"iommu\"",
      "\"domainID\"", ",", ":", "\"\\u0000\""};
  // clang-format on
  std::mt19937 rng(dra::testing::EnvOr("DRA_API_FUZZ_SEED", 20240607));
  const uint64_t iterations = dra::testing::EnvOr("DRA_API_FUZZ_ITERATIONS", 20000);
  for (uint64_t i = 0; i < iterations; ++i) {
    std::string data = dra::testing::MutateSeed(rng, seeds, tokens);
    ASSERT_EQ(FuzzOne(data), 0);
  }
}

}  // namespace
