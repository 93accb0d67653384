#pragma once

// Replays a fuzz corpus through a libFuzzer entry point as an ordinary GoogleTest, so that CI runs
// every corpus file without clang's fuzzer runtime. A crash or abort fails the test.
//
// Two forms: ReplayFuzzCorpus for a library whose one target defines LLVMFuzzerTestOneInput
// itself, and ReplayAndMutate for a named target function (void(const uint8_t*, size_t), built
// into a libFuzzer binary by test/support/fuzz_main.cc): its corpus, edge inputs, then a
// fixed-seed mutation run (MutateSeed).

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/support/build_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace dra::testing {

// Feeds every regular file under `corpus` (relative to the source tree) to the entry point,
// expecting it to return 0 for each; returns how many files were replayed.
inline int ReplayFuzzCorpus(const std::string& corpus) {
  const std::filesystem::path dir = std::filesystem::path(dra::testing::SourceDir()) / corpus;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string data = buf.str();
    SCOPED_TRACE(entry.path().string());
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
              0);
    ++files;
  }
  return files;
}

// The regular files under `corpus` (relative to the source tree), in name order, leaving out those
// over `max_bytes`.
inline std::vector<std::string> ReadFuzzCorpus(const std::string& corpus,
                                               uintmax_t max_bytes = UINTMAX_MAX) {
  const std::filesystem::path dir = std::filesystem::path(dra::testing::SourceDir()) / corpus;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.file_size() <= max_bytes) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> out;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    out.push_back(buf.str());
  }
  return out;
}

// An unsigned integer from the environment (a fuzz seed or an iteration count), else `fallback`.
inline uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::strtoull(value, nullptr, 10);
}

// One mutated input for a replay test's fixed-seed fuzzing: a random seed with one to three edits
// (a flipped byte, an inserted token, a deleted span, another seed's tail spliced in).
// `seeds` must not be empty.
inline std::string MutateSeed(std::mt19937& rng, const std::vector<std::string>& seeds,
                              const std::vector<std::string>& tokens) {
  std::string data = seeds[rng() % seeds.size()];
  for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
    size_t pos = data.empty() ? 0 : rng() % (data.size() + 1);
    switch (rng() % 4) {
      case 0:  // flip a byte
        if (!data.empty()) data[pos % data.size()] = static_cast<char>(rng());
        break;
      case 1:  // insert a token
        data.insert(pos, tokens[rng() % tokens.size()]);
        break;
      case 2:  // delete a span
        data.erase(pos, rng() % 8);
        break;
      case 3: {  // splice another seed's tail
        const std::string& other = seeds[rng() % seeds.size()];
        data = data.substr(0, pos) + other.substr(std::min(other.size(), pos % 16));
        break;
      }
    }
  }
  return data;
}

using FuzzTarget = std::function<void(const uint8_t* data, size_t size)>;

struct FuzzReplay {
  std::string corpus;               // relative to the source tree
  size_t min_seeds = 8;             // fewer files: the corpus is missing
  std::vector<std::string> tokens;  // what mutations insert (MutateSeed)
  // The mutation run: DRA_FUZZ_ITERATIONS / DRA_FUZZ_SEED override these for a longer local run.
  uint64_t iterations = 20000;
  uint64_t seed = 20240607;
  const char* iterations_env = "DRA_FUZZ_ITERATIONS";
  const char* seed_env = "DRA_FUZZ_SEED";
};

// Runs `target` on every file of the corpus, on a few edge inputs (empty, one NUL, 64 KiB of '{',
// of '[' and of newlines, 128 KiB of 'x'), then on `iterations` mutations of the corpus files.
// The target aborts on a violated invariant; an exception fails the test.
inline void ReplayAndMutate(const FuzzReplay& replay, const FuzzTarget& target) {
  auto run = [&](const std::string& data) {
    target(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  };
  const std::vector<std::string> seeds = ReadFuzzCorpus(replay.corpus);
  ASSERT_GE(seeds.size(), replay.min_seeds) << "corpus missing at " << replay.corpus;
  for (const std::string& s : seeds) run(s);
  for (const std::string& s :
       {std::string(), std::string("\0", 1), std::string(1 << 16, '{'), std::string(1 << 16, '['),
        std::string(1 << 16, '\n'), std::string(1 << 17, 'x')}) {
    run(s);
  }
  const std::vector<std::string> tokens =
      replay.tokens.empty() ? std::vector<std::string>{"0", "\n"} : replay.tokens;
  std::mt19937 rng(EnvOr(replay.seed_env, replay.seed));
  const uint64_t iterations = EnvOr(replay.iterations_env, replay.iterations);
  for (uint64_t i = 0; i < iterations; ++i) run(MutateSeed(rng, seeds, tokens));
}

}  // namespace dra::testing
