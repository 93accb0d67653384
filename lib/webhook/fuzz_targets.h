#pragma once

// Named fuzz targets of lib/webhook beside the AdmissionReview one (admission_fuzz.cc): each takes
// any bytes, checks invariants and aborts on a violation (a crash is what a fuzzer reports); none
// may throw. Replayed with lib/webhook/fuzz_corpus_http_request/ by webhook_fuzz_replay_test, and
// built into a libFuzzer binary by the check preset through test/support/fuzz_main.cc:
//   build/check/lib/webhook/webhook_http_request_fuzzer lib/webhook/fuzz_corpus_http_request

#include <cstddef>
#include <cstdint>

namespace dra::webhook::fuzz {

// Bytes as what a client sends on one connection, fed to ParseHttpRequest (https_request.h) in
// pieces whose sizes come from the input itself, the way HttpsConnection reads: parse after every
// piece, answer a complete request and go on with the next one (keep-alive), stop at an error.
// The outcome must not depend on the pieces: each request or error must equal what parsing the
// bytes in one piece gives.
void HttpRequest(const uint8_t* data, size_t size);

}  // namespace dra::webhook::fuzz
