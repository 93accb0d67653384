// libFuzzer entry point for the checkpoint decoder (build with -DDRA_FUZZ=ON and clang to fuzz;
// checkpoint_fuzz_test.cc replays fuzz_corpus/ through the same function in every build).
//
// Properties checked on every input: decoding never crashes; an input that decodes re-encodes,
// and the re-encoded text decodes to the same contents. The Go-format decoder (go_format.h) gets
// every input too and must not crash on any.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "lib/checkpoint/format.h"
#include "lib/checkpoint/go_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  dra::checkpoint::DecodeDiagnostics diag;
  if (dra::checkpoint::LooksLikeGoCheckpoint(text)) {
    (void)dra::checkpoint::DecodeGoCheckpoint(text, &diag);
  }
  absl::StatusOr<dra::checkpoint::Contents> contents =
      dra::checkpoint::DecodeCheckpoint(text, &diag);
  if (!contents.ok()) return 0;
  absl::StatusOr<std::string> encoded = dra::checkpoint::EncodeCheckpoint(*contents);
  if (!encoded.ok()) std::abort();
  absl::StatusOr<dra::checkpoint::Contents> again = dra::checkpoint::DecodeCheckpoint(*encoded);
  if (!again.ok() || !(*again == *contents)) std::abort();
  return 0;
}
