#pragma once

// Replays a fuzz corpus through a libFuzzer entry point as an ordinary GoogleTest, so that CI runs
// every corpus file without clang's fuzzer runtime. A crash or abort fails the test.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

}  // namespace dra::testing
