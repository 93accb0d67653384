#pragma once

// The fuzz target of the server core's request parser (request.h): it takes any bytes, checks
// invariants and aborts on a violation (a crash is what a fuzzer reports); it may not throw.
// Replayed with lib/httpserver/fuzz_corpus_http_request/ by httpserver_fuzz_replay_test, and built
// into a libFuzzer binary by the check preset through test/support/fuzz_main.cc:
//   build/check/lib/httpserver/http_request_fuzzer lib/httpserver/fuzz_corpus_http_request

#include <cstddef>
#include <cstdint>

namespace dra::httpserver::fuzz {

// Bytes as what a client sends on one connection, fed to ParseHttpRequest (request.h) in
// pieces whose sizes come from the input itself, the way Connection reads: parse after every
// piece, answer a complete request and go on with the next one (keep-alive), stop at an error.
// The outcome must not depend on the pieces: each request or error must equal what parsing the
// bytes in one piece gives.
void HttpRequest(const uint8_t* data, size_t size);

}  // namespace dra::httpserver::fuzz
