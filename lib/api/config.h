#pragma once

// The one path from an opaque parameters object to a configuration the drivers can apply, shared
// by the kubelet plugins and the webhook:
//
//   strict decode  ->  Normalize (fill defaults)  ->  Validate (with the feature gates)
//
// DecodeOpaqueConfig runs all three. The steps are also exposed on their own because the GPU
// plugin, like the Go driver, selects configs for devices before it normalizes and validates them.
//
// Errors are permanent config errors (errors.h): InvalidArgument, the message starting with the
// JSON field path and saying what is allowed, e.g.
//   "sharing.mpsConfig.defaultActiveThreadPercentage: expected integer, got string"
//   "sharing.strategy: \"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\"
//    feature gate is not enabled"
// Validation messages after the path are the Go driver's, word for word.
//
// Differences from the Go driver (on purpose; each is a case the Go driver crashes on, or rejects
// only later at prepare time):
// - `timeSlicingConfig: {}` (interval omitted) normalizes to interval Default; Go dereferences a
//   nil pointer and panics.
// - Unknown strategy / interval / backend-policy strings fail at decode (same messages as Go's
//   Validate); missing "strategy" says so instead of "unknown GPU sharing strategy: ".
// - GpuConfig with strategy TimeSlicing and an mpsConfig, or MPS and a timeSlicingConfig, fails in
//   Validate with the messages Go only gives at prepare, so the webhook rejects it too.
// - MPS pinned-memory limits below 1Mi fail in Validate with the messages Go gives at prepare.
// - Every kind is accepted in every caller; the Go webhook wrongly rejects VfioDeviceConfig.
// - Duplicate JSON keys are rejected by DecodeOpaqueConfigText, as by Kubernetes' strict decoder.
//
// Thread-safety: free functions over values; safe to call concurrently.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/api/types.h"
#include "lib/common/feature_gates.h"
#include "nlohmann/json.hpp"

namespace dra::api {

// Strict decode of one parameters object. `apiVersion` must be "resource.nvidia.com/v1beta1",
// `kind` one of the five config kinds; unknown fields, wrong JSON types and out-of-enum strings
// are errors. Null members count as absent, as in Go.
absl::StatusOr<Config> DecodeStrict(const nlohmann::json& parameters);

// Fills the defaults (docs/compatibility.md "Opaque configs"). Idempotent. Does not need the gates:
// a default that Go only fills with a gate on belongs to a strategy that Validate rejects when the
// gate is off.
void Normalize(Config& config);

// Validates a (normally normalized) config against the gates. An un-normalized config does not
// crash: absent values are read as their defaults.
absl::Status Validate(const Config& config, const FeatureGates& gates);

// DecodeStrict + Normalize + Validate.
absl::StatusOr<Config> DecodeOpaqueConfig(const nlohmann::json& parameters,
                                          const FeatureGates& gates);

// Parses JSON text strictly (syntax errors and duplicate object keys are permanent config errors)
// and then runs DecodeOpaqueConfig. The entry point for raw bytes (fuzzing, the webhook).
absl::StatusOr<nlohmann::json> ParseJsonStrict(absl::string_view text);
absl::StatusOr<Config> DecodeOpaqueConfigText(absl::string_view text, const FeatureGates& gates);

// The JSON the Go driver would marshal for `config`: apiVersion, kind, then the fields with
// `omitempty` semantics. DecodeStrict(EncodeConfig(c)) == c for every decodable c.
nlohmann::json EncodeConfig(const Config& config);

}  // namespace dra::api
