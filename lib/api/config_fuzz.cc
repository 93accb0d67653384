// Fuzz target for the opaque config decoder. Invariants checked, beyond "does not crash":
// - every error is a permanent config error (the plugin must never retry a bad config);
// - Normalize is idempotent;
// - EncodeConfig output decodes back to the same value, before and after Normalize;
// - a config that validates with all sharing gates on also resolves MPS limits for any group
//   without crashing, and its errors there are permanent too.

#include "lib/api/config_fuzz.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "lib/api/config.h"
#include "lib/api/consumable_shares.h"
#include "lib/api/driver_gates.h"
#include "lib/api/errors.h"
#include "lib/api/mps_limits.h"
#include "lib/common/feature_gates.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "config fuzz invariant violated: %s\n", what);
  std::abort();
}

void RequirePermanentIfError(const absl::Status& status, const char* what) {
  Require(status.ok() || dra::api::IsPermanentConfigError(status), what);
}

const dra::FeatureGates& GatesWith(const char* spec) {
  auto* gates = new dra::FeatureGates();  // leaked on purpose: lives for the process
  Require(dra::api::RegisterDriverFeatureGates(*gates).ok(), "register gates");
  Require(gates->Set(spec).ok(), "set gates");
  return *gates;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const dra::FeatureGates& default_gates = GatesWith("");
  static const dra::FeatureGates& sharing_gates =
      GatesWith("TimeSlicingSettings=true,MPSSupport=true");

  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<nlohmann::json> parsed = dra::api::ParseJsonStrict(text);
  RequirePermanentIfError(parsed.status(), "parse error not permanent");
  if (!parsed.ok()) return 0;

  absl::StatusOr<dra::api::Config> decoded = dra::api::DecodeStrict(*parsed);
  RequirePermanentIfError(decoded.status(), "decode error not permanent");
  if (!decoded.ok()) return 0;

  absl::StatusOr<dra::api::Config> again = dra::api::DecodeStrict(dra::api::EncodeConfig(*decoded));
  Require(again.ok() && *again == *decoded, "encode/decode round trip (raw)");

  dra::api::Config normalized = *decoded;
  dra::api::Normalize(normalized);
  dra::api::Config twice = normalized;
  dra::api::Normalize(twice);
  Require(twice == normalized, "normalize idempotent");
  again = dra::api::DecodeStrict(dra::api::EncodeConfig(normalized));
  Require(again.ok() && *again == normalized, "encode/decode round trip (normalized)");

  // Validate must cope with un-normalized input too.
  RequirePermanentIfError(dra::api::Validate(*decoded, sharing_gates), "validate raw");
  RequirePermanentIfError(dra::api::Validate(normalized, default_gates), "validate defaults");
  absl::Status valid = dra::api::Validate(normalized, sharing_gates);
  RequirePermanentIfError(valid, "validate sharing");

  absl::StatusOr<dra::api::Config> full = dra::api::DecodeOpaqueConfigText(text, sharing_gates);
  Require(full.ok() == valid.ok(), "one-step and step-wise decoding agree");

  const dra::api::ConsumableShares memory{.mode = dra::api::ConsumableShares::Mode::kMemory};
  RequirePermanentIfError(dra::api::CheckConsumableSharesAllowSharing(normalized, memory),
                          "consumable shares check");

  const dra::api::MpsConfig* mps = nullptr;
  if (const auto* gpu = std::get_if<dra::api::GpuConfig>(&normalized);
      gpu != nullptr && gpu->sharing.has_value() && gpu->sharing->mps_config.has_value()) {
    mps = &*gpu->sharing->mps_config;
  }
  if (const auto* mig = std::get_if<dra::api::MigDeviceConfig>(&normalized);
      mig != nullptr && mig->sharing.has_value() && mig->sharing->mps_config.has_value()) {
    mps = &*mig->sharing->mps_config;
  }
  if (mps != nullptr) {
    for (const std::vector<std::string>& group :
         {std::vector<std::string>{}, std::vector<std::string>{"GPU-b", "GPU-a"},
          std::vector<std::string>{"GPU-0", "MIG-1", "GPU-0"}}) {
      absl::StatusOr<std::map<std::string, int64_t>> limits =
          dra::api::ResolvePinnedMemoryLimits(*mps, group);
      RequirePermanentIfError(limits.status(), "mps limits error not permanent");
      if (limits.ok()) {
        for (const auto& [uuid, mib] : *limits) Require(mib > 0, "mps limit positive");
      }
    }
  }
  return 0;
}
