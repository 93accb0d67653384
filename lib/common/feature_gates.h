#pragma once

// A registry of feature gates in the spirit of k8s.io/component-base/featuregate: each gate has a
// stage, a default, optionally a lock to its default, and constraints between gates (A requires B,
// A excludes B). Users set gates with "--feature-gates=A=true,B=false" (see Flags).
//
//   dra::FeatureGates gates;
//   RETURN_IF_ERROR(gates.Register("DynamicMIG", {.stage = dra::FeatureStage::kAlpha}));
//   RETURN_IF_ERROR(gates.AddMutualExclusion("DynamicMIG", "MPSSupport"));
//   RETURN_IF_ERROR(gates.Set("DynamicMIG=true"));
//   if (gates.Enabled("DynamicMIG")) ...
//
// Besides the registered gates, the names "AllAlpha" and "AllBeta" are understood as in Kubernetes:
// "AllAlpha=true" turns on every unlocked alpha gate that is not set explicitly.
//
// Thread-safety: every method may be called from any thread. The usual life is Register/Add* at
// startup, one Set from the flags, then Enabled from anywhere.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace dra {

enum class FeatureStage { kAlpha, kBeta, kGA, kDeprecated };

// "ALPHA", "BETA", "GA" or "DEPRECATED", as Kubernetes prints them.
absl::string_view FeatureStageName(FeatureStage stage);

struct FeatureSpec {
  FeatureStage stage = FeatureStage::kAlpha;
  bool default_value = false;
  // A locked gate may only be set to its default (typically a GA or deprecated gate).
  bool lock_to_default = false;
  // Non-empty when this binary lacks the capability behind the gate, saying so (e.g. "not
  // available in this version of gpu-kubelet-plugin (not implemented yet)"). Such a gate keeps its
  // default like a locked one (AllAlpha and AllBeta skip it too), and Set refuses any other value
  // with "<name>=<value>: <unavailable>; allowed gates: <the gates that may be changed>", so that
  // no gate is accepted without effect.
  std::string unavailable;
  // One line for KnownGatesHelp(); optional.
  std::string description;
};

class FeatureGates {
 public:
  // The pseudo-gates understood by Set.
  static constexpr absl::string_view kAllAlpha = "AllAlpha";
  static constexpr absl::string_view kAllBeta = "AllBeta";

  FeatureGates() = default;
  FeatureGates(const FeatureGates&) = delete;
  FeatureGates& operator=(const FeatureGates&) = delete;

  // Adds a gate. AlreadyExists for a duplicate name, InvalidArgument for an empty name, a name
  // with characters other than [A-Za-z0-9_.-], or a reserved name (AllAlpha, AllBeta).
  absl::Status Register(absl::string_view name, FeatureSpec spec);

  // When `gate` is enabled, `required` must be enabled too. Both must be registered (NotFound).
  absl::Status AddDependency(absl::string_view gate, absl::string_view required);
  // `a` and `b` must not both be enabled. Both must be registered (NotFound).
  absl::Status AddMutualExclusion(absl::string_view a, absl::string_view b);

  // Parses "A=true, B=false," (whitespace around names and values and empty entries are
  // ignored; values as Go's strconv.ParseBool: 1 t T TRUE true True 0 f F FALSE false False),
  // applies the entries on top of earlier Set calls and validates the result. All or nothing:
  // on error nothing changes. Errors (InvalidArgument) name the gate(s):
  //   unknown gate, malformed entry, a locked gate set to a non-default, an unavailable gate set
  //   to a non-default (FeatureSpec::unavailable),
  //   "feature gate A requires B to also be enabled",
  //   "feature gate A is currently mutually exclusive with B".
  // Constraints are checked on the final values, so the order of entries does not matter.
  absl::Status Set(absl::string_view spec);
  absl::Status SetFromMap(const std::map<std::string, bool>& values);
  // As Set, without checking dependencies and exclusions (for binaries that only read gates,
  // like the webhook). Unknown gates, malformed entries, locks and unavailable gates are still
  // errors.
  absl::Status SetWithoutConstraintChecks(absl::string_view spec);

  // Checks every dependency and exclusion on the current values; all violations in one error.
  absl::Status Validate() const;

  // The effective value. An unregistered name is false (a programming error: tests should cover
  // the names a binary uses with IsKnown).
  bool Enabled(absl::string_view name) const;
  bool IsKnown(absl::string_view name) const;

  // Every registered gate with its effective value, plus AllAlpha and AllBeta.
  std::map<std::string, bool> ToMap() const;
  // ToMap() as "A=true,B=false" (sorted by name), which Set accepts.
  std::string ToString() const;

  // One line per gate, sorted by name, for --help:
  //   "DynamicMIG=true|false (ALPHA - default=false)"
  // with ", locked" for locked gates and ", not available" for unavailable ones, then " requires
  // X", " excludes Y" and ": description".
  std::string KnownGatesHelp() const;
  // The registered gates as a Markdown table, sorted by name: gate, stage, default (with
  // "locked" / "not available"), the gates it requires and excludes, description.
  std::string MarkdownTable() const;

 private:
  struct Gate {
    FeatureSpec spec;
    std::vector<std::string> required;  // gates this one requires
    std::vector<std::string> excluded;  // gates this one excludes
  };
  using Overrides = std::map<std::string, bool, std::less<>>;

  absl::Status SetLocked(absl::string_view spec, bool check_constraints)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplyLocked(const std::vector<std::pair<std::string, bool>>& entries,
                           bool check_constraints) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Names of the gates Set may change (neither locked nor unavailable), comma-separated.
  std::string ChangeableGatesLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  bool EffectiveLocked(const Overrides& overrides, absl::string_view name) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status ValidateLocked(const Overrides& overrides) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Gate, std::less<>> gates_ ABSL_GUARDED_BY(mu_);
  // Constraints in registration order, so that errors come in a stable order.
  std::vector<std::pair<std::string, std::string>> dependencies_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> exclusions_ ABSL_GUARDED_BY(mu_);
  // Explicitly set values, including AllAlpha / AllBeta.
  Overrides overrides_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dra
