// Fuzz target for the webhook's request handling (HandleAdmissionReview and the duplicate-key
// scan). Invariants checked, beyond "does not crash":
// - the HTTP code is 200, 400 or 415, and a 200 body is an admission.k8s.io/v1 AdmissionReview
//   whose response has a boolean "allowed" and, when not allowed, a message and a reason of
//   Invalid or BadRequest;
// - the review result does not depend on the Content-Type beyond the 415;
// - gates only widen what is accepted: allowed with no gates implies allowed with the sharing
//   gates on;
// - the answer from the scan of the text (HandleAdmissionReview) is byte for byte the answer from
//   the whole document (HandleAdmissionReviewWhole).

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/webhook/admission.h"
#include "lib/webhook/duplicate_keys.h"
#include "nlohmann/json.hpp"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "webhook fuzz invariant violated: %s\n", what);
  std::abort();
}

const dra::FeatureGates& GatesWith(const char* spec) {
  auto* gates = new dra::FeatureGates();  // leaked on purpose: lives for the process
  Require(dra::api::RegisterDriverFeatureGates(*gates).ok(), "register gates");
  Require(gates->SetWithoutConstraintChecks(spec).ok(), "set gates");
  return *gates;
}

// Checks the response envelope; returns response.allowed (false for non-200).
bool CheckResult(const dra::webhook::AdmissionResult& r) {
  Require(r.http_code == 200 || r.http_code == 400 || r.http_code == 415, "http code");
  if (r.http_code != 200) {
    Require(r.outcome == dra::webhook::ReviewOutcome::kBadRequest, "4xx outcome");
    Require(!r.message.empty(), "4xx message");
    return false;
  }
  nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  Require(j.is_object(), "200 body is a JSON object");
  Require(j.value("apiVersion", "") == "admission.k8s.io/v1", "response apiVersion");
  Require(j.value("kind", "") == "AdmissionReview", "response kind");
  const nlohmann::json& resp = j["response"];
  Require(resp.is_object() && resp["uid"].is_string(), "response uid");
  Require(resp["allowed"].is_boolean(), "response allowed");
  bool allowed = resp["allowed"].get<bool>();
  Require(allowed == (r.outcome == dra::webhook::ReviewOutcome::kAllowed), "outcome matches");
  if (!allowed) {
    const nlohmann::json& status = resp["status"];
    Require(status.is_object() && status["message"].is_string(), "denial message");
    Require(!status["message"].get<std::string>().empty(), "denial message not empty");
    std::string reason = status.value("reason", "");
    Require(reason == "Invalid" || reason == "BadRequest", "denial reason");
  }
  return allowed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dra::FeatureGates& no_gates = GatesWith("");
  static const dra::FeatureGates& sharing_gates =
      GatesWith("TimeSlicingSettings=true,MPSSupport=true");
  absl::string_view body(reinterpret_cast<const char*>(data), size);

  (void)dra::webhook::FindDuplicateKey(body);
  dra::webhook::AdmissionResult plain =
      dra::webhook::HandleAdmissionReview("application/json", body, no_gates);
  bool allowed = CheckResult(plain);
  dra::webhook::AdmissionResult whole =
      dra::webhook::HandleAdmissionReviewWhole("application/json", body, no_gates);
  Require(plain.http_code == whole.http_code && plain.body == whole.body &&
              plain.content_type == whole.content_type && plain.outcome == whole.outcome &&
              plain.message == whole.message,
          "the scan answers as the whole document does");
  dra::webhook::AdmissionResult gated =
      dra::webhook::HandleAdmissionReview("application/json", body, sharing_gates);
  bool allowed_gated = CheckResult(gated);
  Require(plain.http_code == gated.http_code, "gates do not change the HTTP code");
  Require(!allowed || allowed_gated, "gates only widen what is accepted");
  dra::webhook::AdmissionResult wrong_type =
      dra::webhook::HandleAdmissionReview("text/json", body, no_gates);
  Require(wrong_type.http_code == 415, "content type checked first");
  return 0;
}
