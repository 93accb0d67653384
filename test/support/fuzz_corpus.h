#pragma once

// Replays a fuzz corpus through a libFuzzer entry point as an ordinary GoogleTest, so that CI runs
// every corpus file without clang's fuzzer runtime. A crash or abort fails the test.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace dra::testing {

// Feeds every regular file under `corpus` (relative to the source tree) to the entry point,
// expecting it to return 0 for each; returns how many files were replayed.
inline int ReplayFuzzCorpus(const std::string& corpus) {
  const std::filesystem::path dir = std::filesystem::path(DRA_SOURCE_DIR) / corpus;
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

}  // namespace dra::testing
