// The libFuzzer entry point of one lib/k8s fuzz target (fuzz_targets.h), chosen at build time with
// -DDRA_K8S_FUZZ_TARGET=<HttpResponse|WatchStream|Objects|Kubeconfig>. Only built with
// -DDRA_FUZZ=ON (the fuzz preset).

#include <cstddef>
#include <cstdint>

#include "lib/k8s/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dra::k8s::fuzz::DRA_K8S_FUZZ_TARGET(data, size);
  return 0;
}
