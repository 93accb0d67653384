// libFuzzer entry point for the CDI spec decoder (build with -DDRA_FUZZ=ON and clang to fuzz;
// spec_fuzz_test.cc replays fuzz_corpus/ through the same function in every normal build).
//
// Beyond "no crash, no sanitizer report", it checks two properties on every input that decodes:
// validation and minimum-version computation do not crash, and encode -> decode is the identity.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "lib/cdi/spec.h"
#include "lib/cdi/validate.h"
#include "lib/cdi/version.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<dra::cdi::Spec> spec = dra::cdi::DecodeSpec(text);
  if (!spec.ok()) return 0;
  (void)dra::cdi::ValidateSpec(*spec);
  (void)dra::cdi::MinimumVersion(*spec);
  absl::StatusOr<dra::cdi::Spec> again = dra::cdi::DecodeSpec(dra::cdi::EncodeSpec(*spec));
  if (!again.ok() || !(*again == *spec)) std::abort();
  return 0;
}
