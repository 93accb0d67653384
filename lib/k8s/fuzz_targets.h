#pragma once

// Fuzz entry points for what lib/k8s reads from the network: the HTTP/1.1 response parser
// (http_parse.h), the watch stream (line splitter, envelope, objects; wire_decode.h) and API object
// decoding (list pages, ResourceClaim, ResourceSlice, the typed objects), plus the kubeconfig
// parser (rest_config.h). Each takes any bytes, checks invariants and aborts on a violation (a
// crash is what a fuzzer reports); none may throw.
//
// Built twice: into k8s_fuzz_replay_test, which replays lib/k8s/fuzz_corpus/<target>/ in the unit
// tests, and (the fuzz preset, cmake/fuzz.cmake) into one libFuzzer binary per target through
// test/support/fuzz_main.cc, e.g.
//   build/check/lib/k8s/k8s_watch_fuzzer lib/k8s/fuzz_corpus/watch

#include <cstddef>
#include <cstdint>

namespace dra::k8s::fuzz {

// Bytes as a server's response, fed in pieces whose sizes come from the input itself.
void HttpResponse(const uint8_t* data, size_t size);
// Bytes as the body of a watch response.
void WatchStream(const uint8_t* data, size_t size);
// Bytes as a list response or a single ResourceClaim / ResourceSlice.
void Objects(const uint8_t* data, size_t size);
// Bytes as one object of each other kind the driver decodes: ComputeDomain, ComputeDomainClique,
// Pod, Node, DaemonSet, Lease, ResourceClaimTemplate, DeviceClass, Event. A decoded object must
// encode, decode again and encode to the same JSON.
void TypedObjects(const uint8_t* data, size_t size);
// Bytes as a kubeconfig file; files it names read as a fixed PEM text, except names containing
// "missing", which do not exist.
void Kubeconfig(const uint8_t* data, size_t size);

}  // namespace dra::k8s::fuzz
