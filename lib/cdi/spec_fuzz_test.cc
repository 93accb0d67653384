// Replays every file of fuzz_corpus/ through the fuzz entry point, so that CI runs the corpus
// without clang's fuzzer runtime. A crash or abort fails the test.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

TEST(CdiSpecFuzzCorpus, ReplaysEveryFile) {
  const std::filesystem::path corpus =
      std::filesystem::path(DRA_SOURCE_DIR) / "lib/cdi/fuzz_corpus";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
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
  EXPECT_GE(files, 5) << "corpus at " << corpus << " is missing or nearly empty";
}

}  // namespace
