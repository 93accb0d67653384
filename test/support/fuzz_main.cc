// The libFuzzer entry point of one named fuzz target, a function void(const uint8_t*, size_t),
// chosen at build time (cmake/fuzz.cmake, dra_fuzzer):
//   DRA_FUZZ_TARGET=dra::httpserver::fuzz::HttpRequest
//   DRA_FUZZ_TARGET_HEADER="lib/httpserver/fuzz_targets.h"   (declares it)
// The same function is replayed by its library's unit test (test/support/fuzz_corpus.h,
// ReplayAndMutate). Only built with -DDRA_FUZZ=ON (the check preset).

#include <cstddef>
#include <cstdint>

#include DRA_FUZZ_TARGET_HEADER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DRA_FUZZ_TARGET(data, size);
  return 0;
}
