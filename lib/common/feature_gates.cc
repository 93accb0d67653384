#include "lib/common/feature_gates.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/common/log.h"
#include "lib/common/markdown.h"
#include "lib/common/parse.h"
#include "lib/common/status.h"

namespace dra {
namespace {

bool IsValidGateName(absl::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

bool IsPseudoGate(absl::string_view name) {
  return name == FeatureGates::kAllAlpha || name == FeatureGates::kAllBeta;
}

}  // namespace

absl::string_view FeatureStageName(FeatureStage stage) {
  switch (stage) {
    case FeatureStage::kAlpha:
      return "ALPHA";
    case FeatureStage::kBeta:
      return "BETA";
    case FeatureStage::kGA:
      return "GA";
    case FeatureStage::kDeprecated:
      return "DEPRECATED";
  }
  return "UNKNOWN";
}

absl::Status FeatureGates::Register(absl::string_view name, FeatureSpec spec) {
  if (!IsValidGateName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid feature gate name \"", name, "\": want [A-Za-z0-9_.-]+"));
  }
  if (IsPseudoGate(name)) {
    return absl::InvalidArgumentError(absl::StrCat("feature gate name ", name, " is reserved"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = gates_.try_emplace(std::string(name));
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("feature gate ", name, " registered twice"));
  }
  it->second.spec = std::move(spec);
  return absl::OkStatus();
}

absl::Status FeatureGates::AddDependency(absl::string_view gate, absl::string_view required) {
  absl::MutexLock lock(&mu_);
  for (absl::string_view name : {gate, required}) {
    if (!gates_.contains(name)) {
      return absl::NotFoundError(
          absl::StrCat("dependency ", gate, " -> ", required, ": unknown feature gate ", name));
    }
  }
  if (gate == required) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature gate ", gate, " cannot require itself"));
  }
  gates_.find(gate)->second.required.emplace_back(required);
  dependencies_.emplace_back(gate, required);
  return absl::OkStatus();
}

absl::Status FeatureGates::AddMutualExclusion(absl::string_view a, absl::string_view b) {
  absl::MutexLock lock(&mu_);
  for (absl::string_view name : {a, b}) {
    if (!gates_.contains(name)) {
      return absl::NotFoundError(
          absl::StrCat("exclusion ", a, " <-> ", b, ": unknown feature gate ", name));
    }
  }
  if (a == b) {
    return absl::InvalidArgumentError(absl::StrCat("feature gate ", a, " cannot exclude itself"));
  }
  gates_.find(a)->second.excluded.emplace_back(b);
  gates_.find(b)->second.excluded.emplace_back(a);
  exclusions_.emplace_back(a, b);
  return absl::OkStatus();
}

absl::Status FeatureGates::Set(absl::string_view spec) {
  absl::MutexLock lock(&mu_);
  return SetLocked(spec, /*check_constraints=*/true);
}

absl::Status FeatureGates::SetWithoutConstraintChecks(absl::string_view spec) {
  absl::MutexLock lock(&mu_);
  return SetLocked(spec, /*check_constraints=*/false);
}

absl::Status FeatureGates::SetFromMap(const std::map<std::string, bool>& values) {
  absl::MutexLock lock(&mu_);
  return ApplyLocked({values.begin(), values.end()}, /*check_constraints=*/true);
}

absl::Status FeatureGates::SetLocked(absl::string_view spec, bool check_constraints) {
  std::vector<std::pair<std::string, bool>> entries;
  for (absl::string_view raw : absl::StrSplit(spec, ',')) {
    absl::string_view entry = absl::StripAsciiWhitespace(raw);
    if (entry.empty()) continue;  // "A=true," is fine, as in the Go driver
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    absl::string_view name = absl::StripAsciiWhitespace(kv.first);
    absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed feature gate entry \"", entry, "\": missing gate name"));
    }
    if (entry.find('=') == absl::string_view::npos || value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("malformed feature gate entry \"", entry,
                                                     "\": want ", name, "=true or ", name,
                                                     "=false"));
    }
    bool enabled = false;
    if (!ParseGoBool(value, &enabled)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid value \"", value, "\" for feature gate ", name, ": want true or false"));
    }
    entries.emplace_back(name, enabled);
  }
  return ApplyLocked(entries, check_constraints);
}

absl::Status FeatureGates::ApplyLocked(const std::vector<std::pair<std::string, bool>>& entries,
                                       bool check_constraints) {
  Overrides candidate = overrides_;
  for (const auto& [name, enabled] : entries) {
    if (!IsPseudoGate(name)) {
      auto it = gates_.find(name);
      if (it == gates_.end()) {
        std::vector<absl::string_view> known;
        for (const auto& [known_name, gate] : gates_) known.push_back(known_name);
        return absl::InvalidArgumentError(
            absl::StrCat("unknown feature gate \"", name,
                         "\" (known: ", known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
      }
      const FeatureSpec& spec = it->second.spec;
      if (!spec.unavailable.empty() && enabled != spec.default_value) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, "=", enabled ? "true" : "false", ": ", spec.unavailable,
                         "; allowed gates: ", ChangeableGatesLocked()));
      }
      if (spec.lock_to_default && enabled != spec.default_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot set feature gate ", name, " to ", enabled ? "true" : "false",
                         ": it is locked to ", spec.default_value ? "true" : "false"));
      }
      if (spec.stage == FeatureStage::kDeprecated || spec.stage == FeatureStage::kGA) {
        DRA_WARNING("setting a feature gate that will be removed in a future release", "gate", name,
                    "stage", FeatureStageName(spec.stage), "value", enabled);
      }
    }
    candidate[name] = enabled;
  }
  if (check_constraints) RETURN_IF_ERROR(ValidateLocked(candidate));
  overrides_ = std::move(candidate);
  return absl::OkStatus();
}

std::string FeatureGates::ChangeableGatesLocked() const {
  std::vector<absl::string_view> names;
  for (const auto& [name, gate] : gates_) {
    if (!gate.spec.lock_to_default && gate.spec.unavailable.empty()) names.push_back(name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

bool FeatureGates::EffectiveLocked(const Overrides& overrides, absl::string_view name) const {
  auto gate = gates_.find(name);
  if (gate == gates_.end()) {
    if (IsPseudoGate(name)) {
      auto it = overrides.find(name);
      return it != overrides.end() && it->second;
    }
    return false;
  }
  if (auto it = overrides.find(name); it != overrides.end()) return it->second;
  const FeatureSpec& spec = gate->second.spec;
  if (!spec.lock_to_default && spec.unavailable.empty()) {
    absl::string_view all;
    if (spec.stage == FeatureStage::kAlpha) all = kAllAlpha;
    if (spec.stage == FeatureStage::kBeta) all = kAllBeta;
    if (auto it = overrides.find(all); !all.empty() && it != overrides.end()) return it->second;
  }
  return spec.default_value;
}

absl::Status FeatureGates::ValidateLocked(const Overrides& overrides) const {
  std::vector<std::string> problems;
  for (const auto& [gate, required] : dependencies_) {
    if (EffectiveLocked(overrides, gate) && !EffectiveLocked(overrides, required)) {
      problems.push_back(
          absl::StrCat("feature gate ", gate, " requires ", required, " to also be enabled"));
    }
  }
  for (const auto& [a, b] : exclusions_) {
    if (EffectiveLocked(overrides, a) && EffectiveLocked(overrides, b)) {
      problems.push_back(
          absl::StrCat("feature gate ", a, " is currently mutually exclusive with ", b));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

absl::Status FeatureGates::Validate() const {
  absl::ReaderMutexLock lock(&mu_);
  return ValidateLocked(overrides_);
}

bool FeatureGates::Enabled(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  return EffectiveLocked(overrides_, name);
}

bool FeatureGates::IsKnown(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  return gates_.contains(name);
}

std::map<std::string, bool> FeatureGates::ToMap() const {
  absl::ReaderMutexLock lock(&mu_);
  std::map<std::string, bool> out;
  for (const auto& [name, gate] : gates_) out[name] = EffectiveLocked(overrides_, name);
  for (absl::string_view pseudo : {kAllAlpha, kAllBeta}) {
    out[std::string(pseudo)] = EffectiveLocked(overrides_, pseudo);
  }
  return out;
}

std::string FeatureGates::ToString() const {
  return absl::StrJoin(ToMap(), ",", [](std::string* out, const std::pair<std::string, bool>& kv) {
    absl::StrAppend(out, kv.first, "=", kv.second ? "true" : "false");
  });
}

std::string FeatureGates::KnownGatesHelp() const {
  absl::ReaderMutexLock lock(&mu_);
  std::map<std::string, std::string> lines;
  lines[std::string(kAllAlpha)] = "=true|false (ALPHA - default=false): all alpha gates";
  lines[std::string(kAllBeta)] = "=true|false (BETA - default=false): all beta gates";
  for (const auto& [name, gate] : gates_) {
    const FeatureSpec& spec = gate.spec;
    std::string line = absl::StrCat("=true|false (", FeatureStageName(spec.stage),
                                    " - default=", spec.default_value ? "true" : "false",
                                    spec.lock_to_default ? ", locked" : "",
                                    spec.unavailable.empty() ? "" : ", not available", ")");
    if (!gate.required.empty())
      absl::StrAppend(&line, " requires ", absl::StrJoin(gate.required, ","));
    if (!gate.excluded.empty())
      absl::StrAppend(&line, " excludes ", absl::StrJoin(gate.excluded, ","));
    if (!spec.description.empty()) absl::StrAppend(&line, ": ", spec.description);
    lines[name] = std::move(line);
  }
  std::string out;
  for (const auto& [name, rest] : lines) absl::StrAppend(&out, name, rest, "\n");
  return out;
}

std::string FeatureGates::MarkdownTable() const {
  absl::ReaderMutexLock lock(&mu_);
  std::string out =
      "| Gate | Stage | Default | Requires | Excludes | Description |\n"
      "|---|---|---|---|---|---|\n";
  for (const auto& [name, gate] : gates_) {
    const FeatureSpec& spec = gate.spec;
    std::string default_text = spec.default_value ? "true" : "false";
    if (spec.lock_to_default) absl::StrAppend(&default_text, " (locked)");
    if (!spec.unavailable.empty()) absl::StrAppend(&default_text, " (not available)");
    absl::StrAppend(&out, "| `", name, "` | ", FeatureStageName(spec.stage), " | ", default_text,
                    " | ", absl::StrJoin(gate.required, ", "), " | ",
                    absl::StrJoin(gate.excluded, ", "), " | ", MarkdownCell(spec.description),
                    " |\n");
  }
  return out;
}

}  // namespace dra
