#pragma once

// Command-line flags where every flag also reads one environment variable, as urfave/cli does for
// the Go driver. A binary's main.cc declares its options and parses:
//
//   Options opts;  // fields hold the defaults
//   dra::FeatureGates gates;  // gates registered by the driver library
//   dra::Flags flags("gpu-kubelet-plugin", "gpu-kubelet-plugin implements a DRA driver plugin...");
//   flags.AddString("node-name", "NODE_NAME", &opts.node_name, "Node to work on.").Required();
//   flags.AddInt("kube-api-qps", "KUBE_API_QPS", &opts.qps, "Client QPS.");
//   flags.AddLoggingFlags();
//   flags.AddFeatureGatesFlag(&gates);
//   flags.ParseOrExit(argc, argv);   // or Parse(), which returns a status
//
// Syntax: "--name value", "--name=value", "-name value", "-name=value" (Go style); bools as
// "--name", "--name=true", "--name=false". "-h", "--help" print the help; "--version" the version
// (when SetVersion was called). A later occurrence of a flag overrides an earlier one; list flags
// accumulate. "--" ends the flags.
//
// Precedence: command line, then the environment, then the default (the target's value when the
// flag was added). An empty environment variable counts as unset. The target is written only when
// a value is given, and only by Parse.
//
// Positional arguments are rejected unless they name a command added with AddCommand (the first
// positional is the command, e.g. "compute-domain-daemon -v 4 run").
//
// Thread-safety: a Flags object is used by one thread (main) during startup. Targets must outlive
// Parse.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dra {

class FeatureGates;

// Where a flag's value came from.
enum class FlagSource { kDefault, kEnv, kCommandLine };

class Flags {
 public:
  struct Flag;  // defined in flags_internal.h

  // Adjusts the flag just added: flags.AddString(...).Required().Alias("old-name").
  class FlagRef {
   public:
    explicit FlagRef(Flag* flag) : flag_(flag) {}
    // Parse fails when neither the command line nor the environment gives a value.
    FlagRef& Required();
    // Another accepted flag name (shown in --help).
    FlagRef& Alias(absl::string_view name);
    // Another environment variable, consulted after the earlier ones.
    FlagRef& Env(absl::string_view env);
    // Not listed by --help.
    FlagRef& Hidden();

   private:
    Flag* flag_;
  };

  enum class ParseResult {
    kRun,          // flags are set; go on
    kExitSuccess,  // help or version was printed; main should return 0
  };

  // `program` is the name shown in help and errors; `description` one or more sentences.
  Flags(std::string program, std::string description);
  ~Flags();
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // `name` is the long name without dashes ("node-name"); `env` the variable ("NODE_NAME").
  // Mistakes in the declarations (duplicate names, bad names) are reported by Parse.
  FlagRef AddString(absl::string_view name, absl::string_view env, std::string* target,
                    absl::string_view help);
  FlagRef AddBool(absl::string_view name, absl::string_view env, bool* target,
                  absl::string_view help);
  FlagRef AddInt(absl::string_view name, absl::string_view env, int* target,
                 absl::string_view help);
  FlagRef AddInt64(absl::string_view name, absl::string_view env, int64_t* target,
                   absl::string_view help);
  FlagRef AddDouble(absl::string_view name, absl::string_view env, double* target,
                    absl::string_view help);
  // Go-style durations: "10s", "1m30s", "250ms", "0".
  FlagRef AddDuration(absl::string_view name, absl::string_view env, absl::Duration* target,
                      absl::string_view help);
  // Comma-separated; items are trimmed and empty ones dropped. Repeating the flag appends.
  // A value given replaces the default list.
  FlagRef AddStringList(absl::string_view name, absl::string_view env,
                        std::vector<std::string>* target, absl::string_view help);
  // Any other type: `parse` receives the raw text and stores it; its error message is wrapped
  // with the flag and env names. `type_name` ("mode") and `default_text` are shown in --help.
  FlagRef AddCustom(absl::string_view name, absl::string_view env, absl::string_view type_name,
                    absl::string_view default_text,
                    std::function<absl::Status(absl::string_view)> parse, absl::string_view help);

  // "-v" / "--v" / env VERBOSITY, then env V (the public driver's): klog verbosity, applied with
  // dra::log::SetVerbosity during Parse (before anything else is logged).
  FlagRef AddLoggingFlags();
  // The API client's flags, shared by every binary that talks to the API server: "--kubeconfig"
  // (env KUBECONFIG; empty: the in-cluster configuration), "--kube-api-qps" (KUBE_API_QPS) and
  // "--kube-api-burst" (KUBE_API_BURST). A null target leaves its flag out.
  void AddKubeClientFlags(std::string* kubeconfig, double* qps, int* burst);
  // The plain-HTTP server for Prometheus metrics and /healthz: "--http-endpoint"
  // (HTTP_ENDPOINT; empty disables the server) and "--metrics-path" (METRICS_PATH; empty
  // disables the metrics).
  void AddMetricsServerFlags(std::string* endpoint, std::string* metrics_path);
  // "--feature-gates" / env FEATURE_GATES, applied with gates->Set during Parse; its help lists
  // gates->KnownGatesHelp(). `gates` must outlive Parse.
  FlagRef AddFeatureGatesFlag(FeatureGates* gates);
  // Enables "--version", which prints "<program> <version>".
  void SetVersion(absl::string_view version);
  // Enables the unlisted "--help-metrics-markdown", which prints `markdown()`: every metric family
  // the binary serves, as metrics::DescribeMarkdown rows, for docs/reference.md
  // (hack/gen-reference.sh). Without it the option is an unknown flag.
  void SetMetricsReference(std::function<std::string()> markdown);
  // Enables the unlisted "--help-steps-markdown", which prints `markdown()`: the binary's table of
  // prepare steps (prepare::StepTableMarkdown), for the docs (hack/gen-reference.sh).
  // Without it the option is an unknown flag.
  void SetStepsReference(std::function<std::string()> markdown);
  // Declares a command ("run"); when any is declared, exactly one must be given.
  void AddCommand(absl::string_view name, absl::string_view description);

  // Parses argv (argv[0] is the program path). Errors are InvalidArgument and name the flag and
  // its env var, e.g. `invalid value "abc" for --kube-api-qps (env KUBE_API_QPS): not an
  // integer`; all problems are reported together, one per line.
  absl::StatusOr<ParseResult> Parse(int argc, const char* const* argv);
  // For main(): Parse, then exit(0) after help/version, or print "<program>: <error>" to stderr
  // and exit(2) on error.
  void ParseOrExit(int argc, const char* const* argv);

  // The text --help prints.
  std::string Help() const;
  // The visible flags as a Markdown table (flag, environment, default, description), followed by
  // the feature gates' table (FeatureGates::MarkdownTable) when AddFeatureGatesFlag was called;
  // printed by the unlisted "--help-markdown" for docs/reference.md (hack/gen-reference.sh).
  std::string MarkdownReference() const;
  // The command given (see AddCommand), "" when none are declared.
  const std::string& command() const { return command_; }
  // Where the flag's value came from in the last Parse; kDefault for unknown names.
  FlagSource Source(absl::string_view name) const;
  // The effective configuration, once at start (every binary's main calls it after Parse), in
  // the public driver's words (docs/compatibility.md "Log lines"). At level 0:
  //   "Feature gates: A=true,B=false"   (when `gates` is not null)
  //   "Verbosity: 4"
  //   "Flags:" node-name="n1" v="4" ...  (every visible flag's effective value)
  // At -v=1 also one "flag" line per visible flag with the value's source (command line, env
  // VAR, default).
  void LogStartupConfig(const FeatureGates* gates) const;

  // For tests: environment lookup (default: getenv) and where help/version go (default: stdout).
  void SetEnvLookupForTest(std::function<std::optional<std::string>(const std::string&)> lookup);
  void SetOutputForTest(std::ostream* out);

 private:
  FlagRef Add(absl::string_view name, absl::string_view env, absl::string_view type_name,
              std::string default_text, std::function<absl::Status(absl::string_view)> parse,
              absl::string_view help);
  absl::Status CheckDeclarations() const;
  Flag* Find(absl::string_view name) const;
  // Prints help or version when asked for; returns whether it did.
  bool HandleHelpOrVersion(int argc, const char* const* argv) const;
  std::vector<std::string> NormalizeArgs(int argc, const char* const* argv) const;
  // Sorts CLI11's leftovers into unknown flags, the command and unsupported arguments.
  void TakePositionals(const std::vector<std::string>& remaining,
                       std::vector<std::string>* problems);
  // Picks the value (command line, env, default) and stores it through the flag's parser.
  void ApplyValue(Flag& flag, const std::vector<std::string>& cli_values,
                  std::vector<std::string>* problems);

  std::string program_;
  std::string description_;
  std::string version_;
  std::function<std::string()> metrics_reference_;
  std::function<std::string()> steps_reference_;
  std::vector<std::unique_ptr<Flag>> flags_;
  std::vector<std::pair<std::string, std::string>> commands_;
  std::string command_;
  std::function<std::optional<std::string>(const std::string&)> env_lookup_;
  std::ostream* out_;
  int verbosity_ = 0;
  const FeatureGates* gates_ = nullptr;  // from AddFeatureGatesFlag
};

}  // namespace dra
