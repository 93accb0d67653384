#pragma once

// The admission logic of the webhook (docs/webhook.md "What it validates") as a pure function over
// the request's Content-Type and body: no sockets, no TLS, so that it is tested and fuzzed
// directly.
//
//   AdmissionResult r = HandleAdmissionReview(content_type, body, gates);
//   // write r.http_code, r.content_type, r.body
//
// What it does:
// - Content-Type must be exactly "application/json", else 415 "contentType=<x>, expected
//   application/json".
// - A body nested deeper than kMaxReviewDepth is answered 400 "could not decode the request body
//   as an AdmissionReview: JSON nested deeper than 10002 levels (...)" before anything parses it.
//   Nothing below recurses once per level of nesting (the scan stops at 256 levels and leaves
//   deeper text to nlohmann's parser, which does not recurse; its documents are only read and
//   moved, never copied or dumped), so any depth up to the limit is handled on a small stack.
// - The body must be an admission.k8s.io/v1 AdmissionReview with a request, else 400 with a
//   message saying what is wrong.
// - DELETE requests and requests without an object are allowed.
// - request.resource must be resource.k8s.io {v1, v1beta1, v1beta2} {resourceclaims,
//   resourceclaimtemplates}; otherwise the review is denied with reason BadRequest.
// - Every spec.devices.config[i] (claims) or spec.spec.devices.config[i] (templates) whose
//   opaque.driver is gpu.nvidia.com is decoded strictly, normalized and validated by lib/api, and
//   its kind must be one the GPU plugin applies in this version (api::CheckGpuConfigKind: not the
//   compute-domain kinds).
//   Each failure is reported with its full field path, e.g.
//     spec.devices.config[0].opaque.parameters.sharing.strategy: unknown GPU sharing strategy: X,
//     supported GPU sharing strategies: TimeSlicing, MPS
//   and all of them are collected into one denial with reason Invalid:
//     "<n> configs failed to validate: <e1>; <e2>".
// - Duplicate keys inside a config's parameters are that config's error (Kubernetes' strict
//   decoder rejects them); duplicates elsewhere in the review are ignored, last one wins.
//
// Thread-safety: a free function over its arguments; call it from any number of threads.

#include <string>

#include "absl/strings/string_view.h"
#include "lib/common/feature_gates.h"

namespace dra::webhook {

// The driver whose configs the webhook validates.
inline constexpr absl::string_view kDriverName = "gpu.nvidia.com";

// The deepest nesting of arrays and objects in request.object: the API server decodes objects
// with Go's encoding/json, which refuses more than 10,000 levels, so it never sends a deeper one.
inline constexpr int kMaxObjectDepth = 10000;
// The same for the whole review, whose root and `request` hold request.object two levels down.
// A deeper body is answered 400 before anything parses it (see HandleAdmissionReview).
inline constexpr int kMaxReviewDepth = kMaxObjectDepth + 2;

// How a review ended, for metrics and logs.
enum class ReviewOutcome {
  kAllowed,     // response.allowed = true
  kDenied,      // response.allowed = false (invalid configs or unsupported resource)
  kBadRequest,  // no AdmissionReview response: HTTP 400 or 415
};

// "allowed", "denied" or "bad_request" (the metrics label value).
absl::string_view ReviewOutcomeName(ReviewOutcome outcome);

struct AdmissionResult {
  int http_code = 200;
  std::string content_type = "application/json";
  std::string body;
  ReviewOutcome outcome = ReviewOutcome::kAllowed;
  // The denial message (empty when allowed); the plain-text error for 400/415.
  std::string message;
};

// Reads the review with one validating scan of its text (review_scan.h) and parses only the
// `config` array; reviews the scan does not vouch for (invalid JSON, \u escapes, duplicate keys,
// exponents, ...) and every 400 are answered by HandleAdmissionReviewWhole.
AdmissionResult HandleAdmissionReview(absl::string_view content_type, absl::string_view body,
                                      const FeatureGates& gates);

// The same answer from nlohmann's document of the whole review: the reference that
// HandleAdmissionReview must match byte for byte (checked by the tests and the fuzzer).
AdmissionResult HandleAdmissionReviewWhole(absl::string_view content_type, absl::string_view body,
                                           const FeatureGates& gates);

}  // namespace dra::webhook
