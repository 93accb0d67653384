#include "lib/common/flags.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags_internal.h"
#include "lib/common/log.h"
#include "lib/common/markdown.h"
#include "lib/common/parse.h"

namespace dra {

namespace {

using flags_internal::Quoted;

std::string Dashed(absl::string_view name) {
  return absl::StrCat(name.size() == 1 ? "-" : "--", name);
}

std::optional<std::string> GetEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

template <typename Int>
std::function<absl::Status(absl::string_view)> IntParser(Int* target, absl::string_view want) {
  return [target, want](absl::string_view text) {
    Int value;
    if (!absl::SimpleAtoi(text, &value)) return absl::InvalidArgumentError(std::string(want));
    *target = value;
    return absl::OkStatus();
  };
}

}  // namespace

namespace flags_internal {

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

}  // namespace flags_internal

Flags::FlagRef& Flags::FlagRef::Required() {
  flag_->required = true;
  return *this;
}

Flags::FlagRef& Flags::FlagRef::Alias(absl::string_view name) {
  flag_->aliases.emplace_back(name);
  return *this;
}

Flags::FlagRef& Flags::FlagRef::Env(absl::string_view env) {
  flag_->envs.emplace_back(env);
  return *this;
}

Flags::FlagRef& Flags::FlagRef::Hidden() {
  flag_->hidden = true;
  return *this;
}

Flags::Flags(std::string program, std::string description)
    : program_(std::move(program)),
      description_(std::move(description)),
      env_lookup_(GetEnv),
      out_(&std::cout) {}

Flags::~Flags() = default;

Flags::FlagRef Flags::Add(absl::string_view name, absl::string_view env,
                          absl::string_view type_name, std::string default_text,
                          std::function<absl::Status(absl::string_view)> parse,
                          absl::string_view help) {
  auto flag = std::make_unique<Flag>();
  flag->name = std::string(name);
  if (!env.empty()) flag->envs.emplace_back(env);
  flag->type_name = std::string(type_name);
  flag->default_text = std::move(default_text);
  flag->parse = std::move(parse);
  flag->help = std::string(help);
  flags_.push_back(std::move(flag));
  return FlagRef(flags_.back().get());
}

Flags::FlagRef Flags::AddString(absl::string_view name, absl::string_view env, std::string* target,
                                absl::string_view help) {
  return Add(
      name, env, "string", Quoted(*target),
      [target](absl::string_view text) {
        *target = std::string(text);
        return absl::OkStatus();
      },
      help);
}

Flags::FlagRef Flags::AddBool(absl::string_view name, absl::string_view env, bool* target,
                              absl::string_view help) {
  FlagRef ref = Add(
      name, env, "", *target ? "true" : "false",
      [target](absl::string_view text) {
        if (!ParseGoBool(text, target)) {
          return absl::InvalidArgumentError("want true or false");
        }
        return absl::OkStatus();
      },
      help);
  flags_.back()->is_bool = true;
  return ref;
}

Flags::FlagRef Flags::AddInt(absl::string_view name, absl::string_view env, int* target,
                             absl::string_view help) {
  return Add(name, env, "int", absl::StrCat(*target), IntParser(target, "want an integer"), help);
}

Flags::FlagRef Flags::AddInt64(absl::string_view name, absl::string_view env, int64_t* target,
                               absl::string_view help) {
  return Add(name, env, "int", absl::StrCat(*target), IntParser(target, "want a 64-bit integer"),
             help);
}

Flags::FlagRef Flags::AddDouble(absl::string_view name, absl::string_view env, double* target,
                                absl::string_view help) {
  return Add(
      name, env, "float", absl::StrCat(*target),
      [target](absl::string_view text) {
        double value;
        if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
          return absl::InvalidArgumentError("want a number");
        }
        *target = value;
        return absl::OkStatus();
      },
      help);
}

Flags::FlagRef Flags::AddDuration(absl::string_view name, absl::string_view env,
                                  absl::Duration* target, absl::string_view help) {
  return Add(
      name, env, "duration", absl::FormatDuration(*target),
      [target](absl::string_view text) {
        absl::Duration value;
        if (!absl::ParseDuration(text, &value)) {
          return absl::InvalidArgumentError("want a duration such as 10s, 1m30s or 250ms");
        }
        *target = value;
        return absl::OkStatus();
      },
      help);
}

Flags::FlagRef Flags::AddStringList(absl::string_view name, absl::string_view env,
                                    std::vector<std::string>* target, absl::string_view help) {
  FlagRef ref = Add(
      name, env, "list", Quoted(absl::StrJoin(*target, ",")),
      [target](absl::string_view text) {
        target->clear();
        for (absl::string_view item : absl::StrSplit(text, ',')) {
          item = absl::StripAsciiWhitespace(item);
          if (!item.empty()) target->emplace_back(item);
        }
        return absl::OkStatus();
      },
      help);
  flags_.back()->is_list = true;
  return ref;
}

Flags::FlagRef Flags::AddCustom(absl::string_view name, absl::string_view env,
                                absl::string_view type_name, absl::string_view default_text,
                                std::function<absl::Status(absl::string_view)> parse,
                                absl::string_view help) {
  return Add(name, env, type_name, std::string(default_text), std::move(parse), help);
}

Flags::FlagRef Flags::AddLoggingFlags() {
  verbosity_ = log::Verbosity();
  return Add(
             "v", "VERBOSITY", "int", absl::StrCat(verbosity_),
             [this](absl::string_view text) {
               int level;
               if (!absl::SimpleAtoi(text, &level) || level < 0) {
                 return absl::InvalidArgumentError("want a non-negative integer");
               }
               verbosity_ = level;
               log::SetVerbosity(level);
               return absl::OkStatus();
             },
             "Log verbosity: lines logged at this level or below are written (klog's -v).")
      // The public driver's env for -v (docs/compatibility.md "Log lines").
      .Env("V");
}

void Flags::AddKubeClientFlags(std::string* kubeconfig, double* qps, int* burst) {
  if (kubeconfig != nullptr) {
    AddString("kubeconfig", "KUBECONFIG", kubeconfig,
              "Kubeconfig file for running outside the cluster; empty: the in-cluster "
              "configuration (service account token and KUBERNETES_SERVICE_HOST/PORT).");
  }
  if (qps != nullptr) {
    AddDouble("kube-api-qps", "KUBE_API_QPS", qps,
              "Sustained requests per second to the API server.");
  }
  if (burst != nullptr) {
    AddInt("kube-api-burst", "KUBE_API_BURST", burst,
           "Requests to the API server allowed at once above --kube-api-qps.");
  }
}

void Flags::AddMetricsServerFlags(std::string* endpoint, std::string* metrics_path) {
  AddString("http-endpoint", "HTTP_ENDPOINT", endpoint,
            "TCP address (host:port, [ipv6]:port, or :port for all interfaces, IPv6 and IPv4) of "
            "the plain-HTTP server for Prometheus metrics and /healthz; empty disables it.");
  AddString("metrics-path", "METRICS_PATH", metrics_path,
            "HTTP path of the Prometheus metrics on --http-endpoint; empty disables them.");
}

Flags::FlagRef Flags::AddFeatureGatesFlag(FeatureGates* gates) {
  FlagRef ref = Add(
      "feature-gates", "FEATURE_GATES", "mapStringBool", "\"\"",
      [gates](absl::string_view text) { return gates->Set(text); },
      "A set of key=value pairs that describe feature gates for alpha/experimental "
      "features. Options are:");
  flags_.back()->extra_help = [gates] { return gates->KnownGatesHelp(); };
  gates_ = gates;
  return ref;
}

void Flags::SetVersion(absl::string_view version) { version_ = std::string(version); }

void Flags::SetMetricsReference(std::function<std::string()> markdown) {
  metrics_reference_ = std::move(markdown);
}

void Flags::SetStepsReference(std::function<std::string()> markdown) {
  steps_reference_ = std::move(markdown);
}

void Flags::AddCommand(absl::string_view name, absl::string_view description) {
  commands_.emplace_back(name, description);
}

void Flags::SetEnvLookupForTest(
    std::function<std::optional<std::string>(const std::string&)> lookup) {
  env_lookup_ = std::move(lookup);
}

void Flags::SetOutputForTest(std::ostream* out) { out_ = out; }

Flags::Flag* Flags::Find(absl::string_view name) const {
  for (const auto& flag : flags_) {
    if (flag->name == name) return flag.get();
    for (const std::string& alias : flag->aliases) {
      if (alias == name) return flag.get();
    }
  }
  return nullptr;
}

FlagSource Flags::Source(absl::string_view name) const {
  Flag* flag = Find(name);
  return flag == nullptr ? FlagSource::kDefault : flag->source;
}

std::string Flags::Help() const {
  std::string out = absl::StrCat("Usage: ", program_,
                                 commands_.empty() ? " [flags]\n" : " [flags] <command> [flags]\n");
  if (!description_.empty()) absl::StrAppend(&out, "\n", description_, "\n");
  if (!commands_.empty()) {
    absl::StrAppend(&out, "\nCommands:\n");
    size_t width = 0;
    for (const auto& [name, description] : commands_) width = std::max(width, name.size());
    for (const auto& [name, description] : commands_) {
      absl::StrAppend(&out, "  ", name, std::string(width - name.size() + 3, ' '), description,
                      "\n");
    }
  }
  absl::StrAppend(&out, "\nFlags:\n");
  auto append_help = [&out](absl::string_view text) {
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "      ", line, "\n");
    }
  };
  for (const auto& flag : flags_) {
    if (flag->hidden) continue;
    std::vector<std::string> names = {Dashed(flag->name)};
    if (flag->name.size() == 1) names.push_back("--" + flag->name);  // "-v, --v"
    for (const std::string& alias : flag->aliases) names.push_back(Dashed(alias));
    std::vector<std::string> notes;
    if (!flag->envs.empty()) notes.push_back(absl::StrCat("env ", absl::StrJoin(flag->envs, ", ")));
    if (flag->required) {
      notes.push_back("required");
    } else if (!flag->default_text.empty()) {
      notes.push_back(absl::StrCat("default ", flag->default_text));
    }
    absl::StrAppend(&out, "  ", absl::StrJoin(names, ", "), flag->type_name.empty() ? "" : " ",
                    flag->type_name);
    if (!notes.empty()) absl::StrAppend(&out, " (", absl::StrJoin(notes, "; "), ")");
    absl::StrAppend(&out, "\n");
    append_help(flag->help);
    if (flag->extra_help) {
      for (absl::string_view line : absl::StrSplit(flag->extra_help(), '\n', absl::SkipEmpty())) {
        absl::StrAppend(&out, "        ", line, "\n");
      }
    }
  }
  absl::StrAppend(&out, "  -h, --help\n");
  append_help("Show this help and exit.");
  if (!version_.empty()) {
    absl::StrAppend(&out, "  --version\n");
    append_help("Print the version and exit.");
  }
  return out;
}

std::string Flags::MarkdownReference() const {
  std::string out =
      "| Flag | Environment | Default | Description |\n"
      "|---|---|---|---|\n";
  for (const auto& flag : flags_) {
    if (flag->hidden) continue;
    std::vector<std::string> names = {absl::StrCat("`", Dashed(flag->name), "`")};
    for (const std::string& alias : flag->aliases) {
      names.push_back(absl::StrCat("`", Dashed(alias), "`"));
    }
    std::vector<std::string> envs;
    for (const std::string& env : flag->envs) envs.push_back(absl::StrCat("`", env, "`"));
    std::string default_text = "required";
    if (!flag->required) {
      default_text = flag->default_text.empty() || flag->default_text == "\"\""
                         ? ""
                         : absl::StrCat("`", flag->default_text, "`");
    }
    // The feature gates get their own table below, instead of their --help lines.
    std::string help = flag->help;
    if (flag->extra_help && flag->name != "feature-gates") {
      absl::StrAppend(&help, "\n", flag->extra_help());
    }
    absl::StrAppend(&out, "| ", absl::StrJoin(names, ", "),
                    flag->type_name.empty() ? "" : absl::StrCat(" ", flag->type_name), " | ",
                    absl::StrJoin(envs, ", "), " | ", default_text, " | ", MarkdownCell(help),
                    " |\n");
  }
  if (gates_ != nullptr) {
    absl::StrAppend(&out, "\nFeature gates (`--feature-gates`):\n\n", gates_->MarkdownTable());
  }
  return out;
}

namespace {

// A flag's effective value as text: the value given, or the default (which --help shows quoted
// for strings and lists: "" and "a" are logged as empty and a).
std::string EffectiveText(const Flags::Flag& flag) {
  absl::string_view text = flag.value_text;
  if (flag.source == FlagSource::kDefault && text.size() >= 2 && text.front() == '"' &&
      text.back() == '"') {
    text = text.substr(1, text.size() - 2);
  }
  return std::string(text);
}

}  // namespace

void Flags::LogStartupConfig(const FeatureGates* gates) const {
  // The public driver prints its effective configuration once at start, at level 0, as
  // "Feature gates: ...", "Verbosity: ...", "Flags: ..." (docs/compatibility.md "Log lines"); the
  // same leading words here, one line each so that every line stays whole.
  if (gates != nullptr) DRA_INFO(absl::StrCat("Feature gates: ", gates->ToString()));
  DRA_INFO(absl::StrCat("Verbosity: ", log::Verbosity()));
  std::string pairs;
  for (const auto& flag : flags_) {
    if (flag->hidden) continue;
    absl::StrAppend(&pairs, " ", flag->name, "=");
    log::internal::AppendQuoted(pairs, EffectiveText(*flag));
  }
  log::internal::Write(log::Severity::kInfo, __FILE__, __LINE__, "Flags:", pairs);
  // Where each value came from: detail for whoever debugs a deployment's settings.
  if (!log::VEnabled(1)) return;
  for (const auto& flag : flags_) {
    if (flag->hidden) continue;
    std::string source = flag->source == FlagSource::kCommandLine ? "command line"
                         : flag->source == FlagSource::kEnv       ? "env " + flag->source_env
                                                                  : "default";
    DRA_INFO("flag", "name", flag->name, "value", EffectiveText(*flag), "source", source);
  }
}

}  // namespace dra
