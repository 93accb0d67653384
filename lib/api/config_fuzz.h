#pragma once

// The libFuzzer entry point for the opaque config decoder (config_fuzz.cc). Built into the fuzzer
// (cmake -DDRA_FUZZ=ON with clang) and into api_config_fuzz_replay_test, which feeds it every file
// of lib/api/fuzz_corpus/ so that CI replays the corpus without the fuzzer runtime.

#include <cstddef>
#include <cstdint>

// Decodes `data` as opaque parameters under several gate settings and checks invariants; aborts
// on a violation (a crash is what the fuzzer reports). Always returns 0.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
