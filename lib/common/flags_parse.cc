// Flags::Parse: argv normalization, CLI11, then environment and defaults.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/common/flags.h"
#include "lib/common/flags_internal.h"
#include "lib/common/status.h"

namespace dra {
namespace {

using flags_internal::Quoted;

bool IsValidFlagName(absl::string_view name) {
  if (name.empty() || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

bool IsValidEnvName(absl::string_view env) {
  if (env.empty() || absl::ascii_isdigit(static_cast<unsigned char>(env.front()))) return false;
  return std::all_of(env.begin(), env.end(), [](char c) {
    return absl::ascii_isupper(static_cast<unsigned char>(c)) ||
           absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string LowerFirst(std::string s) {
  if (!s.empty()) s[0] = absl::ascii_tolower(static_cast<unsigned char>(s[0]));
  return s;
}

}  // namespace

absl::Status Flags::CheckDeclarations() const {
  std::vector<std::string> problems;
  std::set<std::string> names = {"help", "h"};
  if (!version_.empty()) names.insert("version");
  std::set<std::string> envs;
  for (const auto& flag : flags_) {
    std::vector<std::string> flag_names = flag->aliases;
    flag_names.insert(flag_names.begin(), flag->name);
    for (const std::string& name : flag_names) {
      if (!IsValidFlagName(name)) {
        problems.push_back(absl::StrCat("invalid flag name ", Quoted(name)));
      } else if (!names.insert(name).second) {
        problems.push_back(absl::StrCat("flag --", name, " declared twice"));
      }
    }
    for (const std::string& env : flag->envs) {
      if (!IsValidEnvName(env)) {
        problems.push_back(absl::StrCat("invalid env var name ", Quoted(env)));
      } else if (!envs.insert(env).second) {
        problems.push_back(absl::StrCat("env var ", env, " used twice"));
      }
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("flag declarations: ", absl::StrJoin(problems, "; ")));
}

bool Flags::HandleHelpOrVersion(int argc, const char* const* argv) const {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    absl::string_view name = body.substr(0, body.find('='));
    if (name == "h" || name == "help") {
      *out_ << Help();
      return true;
    }
    if (name == "help-markdown") {
      *out_ << MarkdownReference();
      return true;
    }
    if (name == "help-metrics-markdown" && metrics_reference_) {
      *out_ << metrics_reference_();
      return true;
    }
    if (name == "help-steps-markdown" && steps_reference_) {
      *out_ << steps_reference_();
      return true;
    }
    if (name == "version" && !version_.empty()) {
      *out_ << program_ << " " << version_ << "\n";
      return true;
    }
  }
  return false;
}

std::vector<std::string> Flags::NormalizeArgs(int argc, const char* const* argv) const {
  // CLI11 accepts neither single-dash long names ("-v=4", "-kubeconfig x", Go style) nor an
  // empty value after "=" ("--name="): rewrite them to "--v=4", "--kubeconfig x", "--name ''".
  std::vector<std::string> args = {argc > 0 ? argv[0] : program_};
  bool dash_dash = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (dash_dash || arg == "--" || arg.size() < 2 || arg[0] != '-') {
      dash_dash = dash_dash || arg == "--";
      args.push_back(std::move(arg));
      continue;
    }
    absl::string_view body = absl::string_view(arg).substr(arg[1] == '-' ? 2 : 1);
    absl::string_view name = body.substr(0, body.find('='));
    Flag* flag = Find(name);
    if (flag == nullptr) {
      args.push_back(std::move(arg));  // CLI11 leaves it in remaining(): an unknown flag
    } else if (!flag->is_bool && body.size() == name.size() + 1) {
      args.push_back(absl::StrCat("--", name));
      args.emplace_back();
    } else {
      args.push_back(absl::StrCat("--", body));
    }
  }
  return args;
}

void Flags::TakePositionals(const std::vector<std::string>& remaining,
                            std::vector<std::string>* problems) {
  std::vector<std::string> positional;
  bool dash_dash = false;
  for (const std::string& extra : remaining) {
    if (!dash_dash && extra == "--") {
      dash_dash = true;
    } else if (!dash_dash && extra.size() > 1 && extra[0] == '-') {
      problems->push_back(absl::StrCat("unknown flag ", extra.substr(0, extra.find('='))));
    } else {
      positional.push_back(extra);
    }
  }
  if (!commands_.empty()) {
    std::vector<absl::string_view> names;
    for (const auto& [name, description] : commands_) names.push_back(name);
    const std::string known = absl::StrJoin(names, ", ");
    if (positional.empty()) {
      problems->push_back(absl::StrCat("a command is required (", known, ")"));
    } else {
      if (std::find(names.begin(), names.end(), positional.front()) == names.end()) {
        problems->push_back(
            absl::StrCat("unknown command ", Quoted(positional.front()), " (", known, ")"));
      } else {
        command_ = positional.front();
      }
      positional.erase(positional.begin());
    }
  }
  if (!positional.empty()) {
    problems->push_back(absl::StrCat("arguments not supported: ", absl::StrJoin(positional, " ")));
  }
}

void Flags::ApplyValue(Flag& flag, const std::vector<std::string>& cli_values,
                       std::vector<std::string>* problems) {
  const std::string env_note =
      flag.envs.empty() ? "" : absl::StrCat(" (env ", absl::StrJoin(flag.envs, ", "), ")");
  std::string raw;
  if (!cli_values.empty()) {
    raw = flag.is_list ? absl::StrJoin(cli_values, ",") : cli_values.back();
    flag.source = FlagSource::kCommandLine;
  } else {
    for (const std::string& env : flag.envs) {
      std::optional<std::string> value = env_lookup_(env);
      if (value.has_value() && !value->empty()) {
        raw = *std::move(value);
        flag.source = FlagSource::kEnv;
        flag.source_env = env;
        break;
      }
    }
  }
  if (flag.source == FlagSource::kDefault) {
    if (flag.required) {
      problems->push_back(absl::StrCat("missing required flag --", flag.name, env_note));
    }
    return;
  }
  flag.value_text = raw;
  absl::Status s = flag.parse(raw);
  if (s.ok()) return;
  if (flag.source == FlagSource::kEnv) {
    problems->push_back(absl::StrCat("invalid value ", Quoted(raw), " in env ", flag.source_env,
                                     " for --", flag.name, ": ", s.message()));
  } else {
    problems->push_back(absl::StrCat("invalid value ", Quoted(raw), " for --", flag.name, env_note,
                                     ": ", s.message()));
  }
}

absl::StatusOr<Flags::ParseResult> Flags::Parse(int argc, const char* const* argv) {
  RETURN_IF_ERROR(CheckDeclarations());
  if (HandleHelpOrVersion(argc, argv)) return ParseResult::kExitSuccess;
  command_.clear();
  for (auto& flag : flags_) {
    flag->source = FlagSource::kDefault;
    flag->source_env.clear();
    flag->value_text = flag->default_text;
  }

  // CLI11 only splits the command line; values stay strings until ApplyValue.
  CLI::App app(description_, program_);
  app.allow_extras();
  app.set_help_flag();
  std::vector<CLI::Option*> options;
  for (auto& flag : flags_) {
    std::vector<std::string> names = {"--" + flag->name};
    for (const std::string& alias : flag->aliases) names.push_back("--" + alias);
    const std::string spec = absl::StrJoin(names, ",");
    options.push_back(flag->is_bool ? app.add_flag(spec)
                                    : app.add_option(spec)->expected(1)->multi_option_policy(
                                          CLI::MultiOptionPolicy::TakeAll));
  }
  const std::vector<std::string> args = NormalizeArgs(argc, argv);
  std::vector<const char*> cargs;
  for (const std::string& arg : args) cargs.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--v: 1 required TEXT missing".
    absl::string_view what = e.what();
    return absl::InvalidArgumentError(
        absl::StrCat("flag ", what.substr(0, what.find(':')), " needs a value"));
  } catch (const CLI::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat("parse command line: ", LowerFirst(e.what())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("parse command line: ", e.what()));
  }

  std::vector<std::string> problems;
  TakePositionals(app.remaining(), &problems);
  for (size_t i = 0; i < flags_.size(); ++i) {
    std::vector<std::string> cli_values;
    if (options[i]->count() > 0) cli_values = options[i]->results();
    ApplyValue(*flags_[i], cli_values, &problems);
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
  return ParseResult::kRun;
}

void Flags::ParseOrExit(int argc, const char* const* argv) {
  absl::StatusOr<ParseResult> result = Parse(argc, argv);
  if (!result.ok()) {
    std::cerr << program_ << ": " << result.status().message() << "\n"
              << "Run '" << program_ << " --help' for usage.\n";
    std::exit(2);
  }
  if (*result == ParseResult::kExitSuccess) std::exit(0);
}

}  // namespace dra
