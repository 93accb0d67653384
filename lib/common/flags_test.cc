#include "lib/common/flags.h"

#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/common/feature_gates.h"
#include "lib/common/log.h"
#include "lib/common/log_capture.h"

namespace dra {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using Env = std::map<std::string, std::string>;

struct Options {
  std::string node_name;
  std::string namespace_name = "default";
  std::string kubeconfig;
  int qps = 5;
  int64_t big = 1;
  double ratio = 0.5;
  bool enabled = false;
  bool on_by_default = true;
  absl::Duration period = absl::Seconds(10);
  std::vector<std::string> namespaces = {"a"};
};

// A Flags set like a binary's, with a fake environment and captured output.
class FlagsTest : public ::testing::Test {
 protected:
  FlagsTest() : flags_("test-plugin", "test-plugin does things for tests.") {
    flags_.AddString("node-name", "NODE_NAME", &opts_.node_name, "Node to work on.");
    flags_.AddString("namespace", "NAMESPACE", &opts_.namespace_name, "Driver namespace.");
    flags_.AddString("kubeconfig", "KUBECONFIG", &opts_.kubeconfig, "Kubeconfig path.");
    flags_.AddInt("kube-api-qps", "KUBE_API_QPS", &opts_.qps, "Client QPS.");
    flags_.AddInt64("big", "BIG", &opts_.big, "A big number.");
    flags_.AddDouble("ratio", "RATIO", &opts_.ratio, "A ratio.");
    flags_.AddBool("enabled", "ENABLED", &opts_.enabled, "Turns it on.");
    flags_.AddBool("on-by-default", "ON_BY_DEFAULT", &opts_.on_by_default, "On unless off.");
    flags_.AddDuration("period", "PERIOD", &opts_.period, "How often.");
    flags_.AddStringList("additional-namespaces", "ADDITIONAL_NAMESPACES", &opts_.namespaces,
                         "More namespaces.");
    flags_.SetEnvLookupForTest([this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    });
    flags_.SetOutputForTest(&out_);
  }

  absl::StatusOr<Flags::ParseResult> Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/test-plugin");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return flags_.Parse(static_cast<int>(argv.size()), argv.data());
  }
  // Parses and expects success.
  void ParseOk(std::vector<std::string> args) {
    absl::StatusOr<Flags::ParseResult> r = Parse(std::move(args));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(*r, Flags::ParseResult::kRun);
  }
  std::string ParseError(std::vector<std::string> args) {
    absl::StatusOr<Flags::ParseResult> r = Parse(std::move(args));
    if (r.ok()) return "<parse succeeded>";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    return std::string(r.status().message());
  }

  Options opts_;
  Env env_;
  std::ostringstream out_;
  Flags flags_;
};

TEST_F(FlagsTest, DefaultsStayWithoutInput) {
  ParseOk({});
  EXPECT_EQ(opts_.namespace_name, "default");
  EXPECT_EQ(opts_.qps, 5);
  EXPECT_TRUE(opts_.on_by_default);
  EXPECT_EQ(opts_.period, absl::Seconds(10));
  EXPECT_THAT(opts_.namespaces, ElementsAre("a"));
  EXPECT_EQ(flags_.Source("namespace"), FlagSource::kDefault);
}

struct PrecedenceCase {
  std::string name;
  std::vector<std::string> args;
  Env env;
  std::string want;
  FlagSource source;
};

class FlagsPrecedenceTest : public FlagsTest,
                            public ::testing::WithParamInterface<PrecedenceCase> {};

TEST_P(FlagsPrecedenceTest, CommandLineOverEnvOverDefault) {
  const PrecedenceCase& c = GetParam();
  env_ = c.env;
  ParseOk(c.args);
  EXPECT_EQ(opts_.namespace_name, c.want);
  EXPECT_EQ(flags_.Source("namespace"), c.source);
}

INSTANTIATE_TEST_SUITE_P(
    Table, FlagsPrecedenceTest,
    ::testing::Values(
        PrecedenceCase{"Default", {}, {}, "default", FlagSource::kDefault},
        PrecedenceCase{"Env", {}, {{"NAMESPACE", "from-env"}}, "from-env", FlagSource::kEnv},
        PrecedenceCase{"EmptyEnvIsUnset", {}, {{"NAMESPACE", ""}}, "default", FlagSource::kDefault},
        PrecedenceCase{"CommandLine", {"--namespace=cli"}, {}, "cli", FlagSource::kCommandLine},
        PrecedenceCase{"CommandLineBeatsEnv",
                       {"--namespace", "cli"},
                       {{"NAMESPACE", "from-env"}},
                       "cli",
                       FlagSource::kCommandLine},
        PrecedenceCase{"LastOccurrenceWins",
                       {"--namespace=one", "--namespace=two"},
                       {},
                       "two",
                       FlagSource::kCommandLine},
        PrecedenceCase{"EmptyOnCommandLine",
                       {"--namespace="},
                       {{"NAMESPACE", "e"}},
                       "",
                       FlagSource::kCommandLine},
        PrecedenceCase{"SingleDash", {"-namespace", "x"}, {}, "x", FlagSource::kCommandLine},
        PrecedenceCase{"SingleDashEquals", {"-namespace=y"}, {}, "y", FlagSource::kCommandLine},
        PrecedenceCase{"ValueLooksLikeFlag",
                       {"--namespace", "-weird"},
                       {},
                       "-weird",
                       FlagSource::kCommandLine}),
    [](const ::testing::TestParamInfo<PrecedenceCase>& info) { return info.param.name; });

TEST_F(FlagsTest, EveryTypeFromCommandLine) {
  ParseOk({"--node-name=n1", "--kube-api-qps", "-3", "--big=9000000000", "--ratio=0.25",
           "--enabled", "--on-by-default=false", "--period=1m30s", "--additional-namespaces=b, c,,",
           "--additional-namespaces", "d"});
  EXPECT_EQ(opts_.node_name, "n1");
  EXPECT_EQ(opts_.qps, -3);
  EXPECT_EQ(opts_.big, 9000000000);
  EXPECT_DOUBLE_EQ(opts_.ratio, 0.25);
  EXPECT_TRUE(opts_.enabled);
  EXPECT_FALSE(opts_.on_by_default);
  EXPECT_EQ(opts_.period, absl::Seconds(90));
  EXPECT_THAT(opts_.namespaces, ElementsAre("b", "c", "d"));
}

TEST_F(FlagsTest, EveryTypeFromEnv) {
  env_ = {{"NODE_NAME", "n2"}, {"KUBE_API_QPS", "50"},
          {"BIG", "-1"},       {"RATIO", "2"},
          {"ENABLED", "True"}, {"ON_BY_DEFAULT", "0"},
          {"PERIOD", "250ms"}, {"ADDITIONAL_NAMESPACES", " x ,y"}};
  ParseOk({});
  EXPECT_EQ(opts_.node_name, "n2");
  EXPECT_EQ(opts_.qps, 50);
  EXPECT_EQ(opts_.big, -1);
  EXPECT_DOUBLE_EQ(opts_.ratio, 2.0);
  EXPECT_TRUE(opts_.enabled);
  EXPECT_FALSE(opts_.on_by_default);
  EXPECT_EQ(opts_.period, absl::Milliseconds(250));
  EXPECT_THAT(opts_.namespaces, ElementsAre("x", "y"));
  EXPECT_EQ(flags_.Source("period"), FlagSource::kEnv);
}

TEST_F(FlagsTest, BoolForms) {
  struct Case {
    std::vector<std::string> args;
    bool want;
  };
  for (const Case& c : {Case{{"--enabled"}, true}, Case{{"-enabled"}, true},
                        Case{{"--enabled=true"}, true}, Case{{"--enabled=false"}, false},
                        Case{{"--enabled", "--enabled=false"}, false}, Case{{}, false}}) {
    opts_.enabled = false;
    env_ = {{"ENABLED", c.want ? "false" : "true"}};  // loses against the command line
    if (c.args.empty()) env_ = {};
    ParseOk(c.args);
    EXPECT_EQ(opts_.enabled, c.want) << absl::StrJoin(c.args, " ");
  }
}

struct ErrorCase {
  std::string name;
  std::vector<std::string> args;
  Env env;
  std::vector<std::string> substrings;
};

class FlagsErrorTest : public FlagsTest, public ::testing::WithParamInterface<ErrorCase> {};

TEST_P(FlagsErrorTest, NamesTheProblem) {
  const ErrorCase& c = GetParam();
  env_ = c.env;
  const std::string message = ParseError(c.args);
  for (const std::string& sub : c.substrings) EXPECT_THAT(message, HasSubstr(sub));
  EXPECT_FALSE(message.empty());
  EXPECT_TRUE(islower(message[0]) || message[0] == '\"') << message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, FlagsErrorTest,
    ::testing::Values(
        ErrorCase{"IntFromCommandLine",
                  {"--kube-api-qps=abc"},
                  {},
                  {"invalid value \"abc\" for --kube-api-qps (env KUBE_API_QPS): want an integer"}},
        ErrorCase{"IntFromEnv",
                  {},
                  {{"KUBE_API_QPS", "12x"}},
                  {"invalid value \"12x\" in env KUBE_API_QPS for --kube-api-qps: want an "
                   "integer"}},
        ErrorCase{"IntOverflow", {"--kube-api-qps=99999999999"}, {}, {"--kube-api-qps"}},
        ErrorCase{"Int64", {"--big=1.5"}, {}, {"--big", "BIG"}},
        ErrorCase{"Double", {}, {{"RATIO", "half"}}, {"RATIO", "--ratio", "want a number"}},
        ErrorCase{"Bool", {"--enabled=maybe"}, {}, {"\"maybe\"", "--enabled", "true or false"}},
        ErrorCase{"BoolFromEnv", {}, {{"ENABLED", "yes"}}, {"ENABLED", "--enabled"}},
        ErrorCase{"Duration", {"--period=10"}, {}, {"--period", "PERIOD", "duration"}},
        ErrorCase{"UnknownFlag", {"--bogus=1"}, {}, {"unknown flag --bogus"}},
        ErrorCase{"Positional", {"extra", "args"}, {}, {"arguments not supported: extra args"}},
        ErrorCase{"AfterDashDash",
                  {"--", "--namespace=x"},
                  {},
                  {"arguments not supported: --namespace=x"}},
        ErrorCase{"BoolDoesNotTakeNextArg",
                  {"--enabled", "false"},
                  {},
                  {"arguments not supported: false"}},
        ErrorCase{"MissingValue", {"--kubeconfig"}, {}, {"--kubeconfig needs a value"}},
        ErrorCase{"AllProblemsAtOnce",
                  {"--kube-api-qps=x", "--unknown"},
                  {{"PERIOD", "soon"}},
                  {"--kube-api-qps", "unknown flag --unknown", "PERIOD"}}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

TEST_F(FlagsTest, InvalidEnvIsIgnoredWhenCommandLineGivesValue) {
  env_ = {{"KUBE_API_QPS", "not-a-number"}};
  ParseOk({"--kube-api-qps=7"});
  EXPECT_EQ(opts_.qps, 7);
}

TEST_F(FlagsTest, RequiredFlag) {
  std::string image;
  flags_.AddString("image-name", "IMAGE_NAME", &image, "Image.").Required();
  EXPECT_THAT(ParseError({}), HasSubstr("missing required flag --image-name (env IMAGE_NAME)"));
  env_ = {{"IMAGE_NAME", "img:1"}};
  ParseOk({});
  EXPECT_EQ(image, "img:1");
  env_ = {};
  ParseOk({"--image-name=img:2"});
  EXPECT_EQ(image, "img:2");
}

TEST_F(FlagsTest, AliasAndExtraEnv) {
  std::string root = "/";
  flags_.AddString("nvidia-driver-root", "NVIDIA_DRIVER_ROOT", &root, "Driver root.")
      .Alias("host_driver-root")
      .Env("HOST_DRIVER_ROOT");
  env_ = {{"HOST_DRIVER_ROOT", "/second"}};
  ParseOk({});
  EXPECT_EQ(root, "/second");
  env_ = {{"HOST_DRIVER_ROOT", "/second"}, {"NVIDIA_DRIVER_ROOT", "/first"}};
  ParseOk({});
  EXPECT_EQ(root, "/first");
  ParseOk({"--host_driver-root=/alias"});
  EXPECT_EQ(root, "/alias");
  EXPECT_EQ(flags_.Source("host_driver-root"), FlagSource::kCommandLine);
}

TEST_F(FlagsTest, CustomFlag) {
  std::string mode = "disabled";
  flags_.AddCustom(
      "consumable-shares", "CONSUMABLE_SHARES", "mode", "disabled",
      [&mode](absl::string_view text) {
        if (text != "disabled" && text != "memory") {
          return absl::InvalidArgumentError("want disabled or memory");
        }
        mode = std::string(text);
        return absl::OkStatus();
      },
      "Sharing mode.");
  ParseOk({"--consumable-shares=memory"});
  EXPECT_EQ(mode, "memory");
  EXPECT_THAT(ParseError({"--consumable-shares=lots"}),
              HasSubstr("invalid value \"lots\" for --consumable-shares (env CONSUMABLE_SHARES): "
                        "want disabled or memory"));
}

TEST_F(FlagsTest, LoggingFlagsSetVerbosity) {
  flags_.AddLoggingFlags();
  struct Case {
    std::vector<std::string> args;
    Env env;
    int want;
  };
  for (const Case& c :
       {Case{{"-v", "4"}, {}, 4}, Case{{"-v=5"}, {}, 5}, Case{{"--v=6"}, {}, 6},
        Case{{"--v", "2"}, {{"VERBOSITY", "9"}}, 2}, Case{{}, {{"VERBOSITY", "3"}}, 3}}) {
    log::SetVerbosity(0);
    env_ = c.env;
    ParseOk(c.args);
    EXPECT_EQ(log::Verbosity(), c.want) << absl::StrJoin(c.args, " ");
  }
  EXPECT_THAT(ParseError({"-v=-1"}), HasSubstr("-v"));
  log::SetVerbosity(0);
}

// The public driver's -v reads env V (its logging flags take the upper-cased flag name); ours
// reads VERBOSITY first, then V (docs/compatibility.md "Log lines").
TEST_F(FlagsTest, VerbosityAlsoFromThePublicDriversEnvV) {
  flags_.AddLoggingFlags();
  env_ = {{"V", "5"}};
  ParseOk({});
  EXPECT_EQ(log::Verbosity(), 5);
  env_ = {{"V", "5"}, {"VERBOSITY", "2"}};
  ParseOk({});
  EXPECT_EQ(log::Verbosity(), 2);
  log::SetVerbosity(0);
}

TEST_F(FlagsTest, FeatureGatesFlag) {
  FeatureGates gates;
  ASSERT_TRUE(gates.Register("MPSSupport", {.stage = FeatureStage::kAlpha}).ok());
  flags_.AddFeatureGatesFlag(&gates);
  env_ = {{"FEATURE_GATES", "MPSSupport=true,"}};
  ParseOk({});
  EXPECT_TRUE(gates.Enabled("MPSSupport"));
  env_ = {};
  EXPECT_THAT(ParseError({"--feature-gates=Nope=true"}),
              AllOf(HasSubstr("--feature-gates (env FEATURE_GATES)"),
                    HasSubstr("unknown feature gate \"Nope\"")));
}

TEST_F(FlagsTest, HelpShowsDescriptionEnvAndDefault) {
  FeatureGates gates;
  ASSERT_TRUE(gates.Register("MPSSupport", {.stage = FeatureStage::kAlpha}).ok());
  std::string secret;
  std::string image;
  flags_.AddString("secret", "SECRET", &secret, "Hidden.").Hidden();
  flags_.AddString("image-name", "IMAGE_NAME", &image, "Image used for MPS pods.").Required();
  flags_.AddLoggingFlags();
  flags_.AddFeatureGatesFlag(&gates);
  flags_.SetVersion("v1.2.3");
  for (const char* help : {"--help", "-h", "-help"}) {
    out_.str("");
    absl::StatusOr<Flags::ParseResult> r = Parse({"--kube-api-qps=bad", help});
    ASSERT_TRUE(r.ok()) << help << ": " << r.status();  // help wins over other problems
    EXPECT_EQ(*r, Flags::ParseResult::kExitSuccess);
    EXPECT_EQ(out_.str(), flags_.Help());
  }
  const std::string help = flags_.Help();
  EXPECT_THAT(help, HasSubstr("Usage: test-plugin [flags]\n"));
  EXPECT_THAT(help, HasSubstr("test-plugin does things for tests."));
  EXPECT_THAT(help, HasSubstr("  --namespace string (env NAMESPACE; default \"default\")\n"
                              "      Driver namespace.\n"));
  EXPECT_THAT(help, HasSubstr("  --kube-api-qps int (env KUBE_API_QPS; default 5)\n"));
  EXPECT_THAT(help, HasSubstr("  --enabled (env ENABLED; default false)\n"));
  EXPECT_THAT(help, HasSubstr("  --period duration (env PERIOD; default 10s)\n"));
  EXPECT_THAT(help, HasSubstr("  --additional-namespaces list (env ADDITIONAL_NAMESPACES; "
                              "default \"a\")\n"));
  EXPECT_THAT(help, HasSubstr("  --image-name string (env IMAGE_NAME; required)\n"));
  EXPECT_THAT(help, HasSubstr("  -v, --v int (env VERBOSITY, V; default 0)\n"));
  EXPECT_THAT(help, HasSubstr("  --feature-gates mapStringBool (env FEATURE_GATES; default \"\")"));
  EXPECT_THAT(help, HasSubstr("        MPSSupport=true|false (ALPHA - default=false)\n"));
  EXPECT_THAT(help, HasSubstr("  --version\n"));
  EXPECT_THAT(help, Not(HasSubstr("secret")));
}

TEST_F(FlagsTest, MarkdownReference) {
  FeatureGates gates;
  ASSERT_TRUE(gates
                  .Register("MPSSupport", {.stage = FeatureStage::kBeta,
                                           .default_value = true,
                                           .description = "MPS | sharing."})
                  .ok());
  ASSERT_TRUE(gates.Register("Old", {.stage = FeatureStage::kGA, .lock_to_default = true}).ok());
  ASSERT_TRUE(gates.AddDependency("Old", "MPSSupport").ok());
  std::string secret;
  std::string image;
  flags_.AddString("secret", "SECRET", &secret, "Hidden.").Hidden();
  flags_.AddString("image-name", "IMAGE_NAME", &image, "Image | for MPS pods.\nSecond line.")
      .Required()
      .Alias("image");
  flags_.AddLoggingFlags();
  flags_.AddFeatureGatesFlag(&gates);
  absl::StatusOr<Flags::ParseResult> r = Parse({"--help-markdown", "--kube-api-qps=bad"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, Flags::ParseResult::kExitSuccess);
  const std::string md = out_.str();
  EXPECT_EQ(md, flags_.MarkdownReference());
  EXPECT_THAT(
      md, testing::StartsWith("| Flag | Environment | Default | Description |\n"
                              "|---|---|---|---|\n"
                              "| `--node-name` string | `NODE_NAME` |  | Node to work on. |\n"));
  EXPECT_THAT(md, HasSubstr("| `--namespace` string | `NAMESPACE` | `\"default\"` | "
                            "Driver namespace. |\n"));
  EXPECT_THAT(md, HasSubstr("| `--image-name`, `--image` string | `IMAGE_NAME` | required | "
                            "Image \\| for MPS pods.<br>Second line. |\n"));
  EXPECT_THAT(md, HasSubstr("| `-v` int | `VERBOSITY`, `V` | `0` |"));
  EXPECT_THAT(md, HasSubstr("| `--feature-gates` mapStringBool | `FEATURE_GATES` |  | A set of "));
  EXPECT_THAT(md, Not(HasSubstr("MPSSupport=true|false")));  // the --help lines
  EXPECT_THAT(md, HasSubstr("\nFeature gates (`--feature-gates`):\n\n"
                            "| Gate | Stage | Default | Requires | Excludes | Description |\n"
                            "|---|---|---|---|---|---|\n"
                            "| `MPSSupport` | BETA | true |  |  | MPS \\| sharing. |\n"
                            "| `Old` | GA | false (locked) | MPSSupport |  |  |\n"));
  EXPECT_THAT(md, Not(HasSubstr("secret")));
}

TEST_F(FlagsTest, HelpMetricsMarkdownPrintsTheMetricsReferenceWhenSet) {
  EXPECT_THAT(ParseError({"--help-metrics-markdown"}), HasSubstr("unknown flag"));
  flags_.SetMetricsReference([] { return std::string("| `m_total` | counter | - | M. |\n"); });
  absl::StatusOr<Flags::ParseResult> r = Parse({"--help-metrics-markdown", "--kube-api-qps=bad"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, Flags::ParseResult::kExitSuccess);
  EXPECT_EQ(out_.str(), "| `m_total` | counter | - | M. |\n");
}

TEST_F(FlagsTest, HelpStepsMarkdownPrintsTheStepsReferenceWhenSet) {
  EXPECT_THAT(ParseError({"--help-steps-markdown"}), HasSubstr("unknown flag"));
  flags_.SetStepsReference([] { return std::string("| `cdiSpec` | always |\n"); });
  absl::StatusOr<Flags::ParseResult> r = Parse({"--help-steps-markdown", "--kube-api-qps=bad"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, Flags::ParseResult::kExitSuccess);
  EXPECT_EQ(out_.str(), "| `cdiSpec` | always |\n");
}

TEST_F(FlagsTest, Version) {
  ParseOk({});  // no --version flag without SetVersion
  EXPECT_THAT(ParseError({"--version"}), HasSubstr("unknown flag --version"));
  flags_.SetVersion("v0.5.0 commit: abc");
  absl::StatusOr<Flags::ParseResult> r = Parse({"--version"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, Flags::ParseResult::kExitSuccess);
  EXPECT_EQ(out_.str(), "test-plugin v0.5.0 commit: abc\n");
}

TEST_F(FlagsTest, Commands) {
  flags_.AddCommand("run", "Run the daemon.");
  flags_.AddCommand("check", "Check health.");
  EXPECT_THAT(ParseError({}), HasSubstr("a command is required (run, check)"));
  EXPECT_THAT(ParseError({"walk"}), HasSubstr("unknown command \"walk\" (run, check)"));
  EXPECT_THAT(ParseError({"run", "extra"}), HasSubstr("arguments not supported: extra"));
  ParseOk({"--namespace", "before", "run"});
  EXPECT_EQ(flags_.command(), "run");
  EXPECT_EQ(opts_.namespace_name, "before");
  ParseOk({"check", "--namespace=after"});
  EXPECT_EQ(flags_.command(), "check");
  EXPECT_EQ(opts_.namespace_name, "after");
  EXPECT_THAT(flags_.Help(), AllOf(HasSubstr("Usage: test-plugin [flags] <command> [flags]"),
                                   HasSubstr("  run     Run the daemon.\n"),
                                   HasSubstr("  check   Check health.\n")));
}

TEST(FlagsDeclarationTest, MistakesAreReportedByParse) {
  Flags flags("p", "");
  std::string a, b, c;
  flags.AddString("same", "A", &a, "");
  flags.AddString("same", "B", &b, "");
  flags.AddString("Bad Name", "lower-case", &c, "");
  const char* argv[] = {"p"};
  absl::StatusOr<Flags::ParseResult> r = flags.Parse(1, argv);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr("flag --same declared twice"), HasSubstr("invalid flag name"),
                    HasSubstr("invalid env var name \"lower-case\"")));
}

// The effective configuration at start, in the public driver's leading words ("Feature gates:",
// "Verbosity:", "Flags:"), at level 0: written with -v=0 (docs/compatibility.md "Log lines").
TEST_F(FlagsTest, StartupConfigAtLevelZeroInThePublicDriversWords) {
  FeatureGates gates;
  ASSERT_TRUE(gates.Register("TimeSlicingSettings", {.stage = FeatureStage::kAlpha}).ok());
  flags_.AddLoggingFlags();
  flags_.AddFeatureGatesFlag(&gates);
  log::LogCapture logs;
  env_ = {{"KUBE_API_QPS", "9"}};
  ParseOk({"--namespace=ns", "--feature-gates=TimeSlicingSettings=true", "-v=0"});
  flags_.LogStartupConfig(&gates);
  const std::vector<std::string> lines = logs.Lines();
  ASSERT_EQ(lines.size(), 3u) << absl::StrJoin(lines, "");
  EXPECT_THAT(lines[0], HasSubstr("] \"Feature gates: AllAlpha=false,AllBeta=false,"
                                  "TimeSlicingSettings=true\"\n"));
  EXPECT_EQ(lines[0][0], 'I');
  EXPECT_THAT(lines[1], HasSubstr("] \"Verbosity: 0\"\n"));
  EXPECT_THAT(lines[2], HasSubstr("] \"Flags:\" node-name=\"\" namespace=\"ns\""));
  EXPECT_THAT(lines[2], AllOf(HasSubstr(" kube-api-qps=\"9\""), HasSubstr(" period=\"10s\""),
                              HasSubstr(" v=\"0\""), HasSubstr(" additional-namespaces=\"a\""),
                              HasSubstr(" feature-gates=\"TimeSlicingSettings=true\"")));
}

// Where each value came from is detail: -v=1.
TEST_F(FlagsTest, StartupConfigSourcesAtLevelOne) {
  flags_.AddLoggingFlags();
  log::LogCapture logs;
  env_ = {{"KUBE_API_QPS", "9"}};
  ParseOk({"--namespace=ns", "-v=1"});
  flags_.LogStartupConfig(/*gates=*/nullptr);
  log::SetVerbosity(0);
  const std::string all = logs.Text();
  EXPECT_THAT(all, Not(HasSubstr("Feature gates:")));
  EXPECT_THAT(all, HasSubstr("\"Verbosity: 1\""));
  EXPECT_THAT(all, HasSubstr("\"flag\" name=\"namespace\" value=\"ns\" source=\"command line\""));
  EXPECT_THAT(all, HasSubstr("name=\"kube-api-qps\" value=\"9\" source=\"env KUBE_API_QPS\""));
  EXPECT_THAT(all, HasSubstr("name=\"period\" value=\"10s\" source=\"default\""));
}

void ParseOrExitWith(const char* arg) {
  Flags flags("exit-test", "d");
  const char* argv[] = {"exit-test", arg};
  flags.ParseOrExit(2, argv);
}

TEST(FlagsParseOrExitTest, ExitsZeroAfterHelpAndTwoOnError) {
  EXPECT_EXIT(ParseOrExitWith("--help"), ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(ParseOrExitWith("--nope"), ::testing::ExitedWithCode(2),
              "exit-test: unknown flag --nope");
}

TEST(FlagsRealEnvTest, ReadsProcessEnvironmentByDefault) {
  ASSERT_EQ(setenv("DRA_FLAGS_TEST_VALUE", "42", 1), 0);
  Flags flags("p", "");
  int value = 0;
  flags.AddInt("value", "DRA_FLAGS_TEST_VALUE", &value, "");
  const char* argv[] = {"p"};
  ASSERT_TRUE(flags.Parse(1, argv).ok());
  EXPECT_EQ(value, 42);
  unsetenv("DRA_FLAGS_TEST_VALUE");
}

}  // namespace
}  // namespace dra

namespace dra {
namespace {

absl::StatusOr<Flags::ParseResult> ParseArgs(Flags& flags, std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/shared-flags");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  flags.SetEnvLookupForTest([](const std::string& name) -> std::optional<std::string> {
    if (name == "KUBE_API_BURST") return "40";
    if (name == "METRICS_PATH") return "/m";
    return std::nullopt;
  });
  return flags.Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(SharedFlagsTest, KubeClientAndMetricsServerFlagsFillTheirTargets) {
  Flags flags("shared-flags", "shared-flags tests the shared flag groups.");
  std::string kubeconfig, endpoint, metrics_path = "/metrics";
  double qps = 5;
  int burst = 10;
  flags.AddKubeClientFlags(&kubeconfig, &qps, &burst);
  flags.AddMetricsServerFlags(&endpoint, &metrics_path);
  absl::StatusOr<Flags::ParseResult> r =
      ParseArgs(flags, {"--kubeconfig=/k", "--kube-api-qps=7.5", "--http-endpoint=:8080"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(kubeconfig, "/k");
  EXPECT_DOUBLE_EQ(qps, 7.5);
  EXPECT_EQ(burst, 40);  // from KUBE_API_BURST
  EXPECT_EQ(endpoint, ":8080");
  EXPECT_EQ(metrics_path, "/m");  // from METRICS_PATH
}

TEST(SharedFlagsTest, NullTargetLeavesItsFlagOut) {
  Flags flags("shared-flags", "shared-flags tests the shared flag groups.");
  std::string kubeconfig;
  flags.AddKubeClientFlags(&kubeconfig, /*qps=*/nullptr, /*burst=*/nullptr);
  absl::StatusOr<Flags::ParseResult> r = ParseArgs(flags, {"--kube-api-qps=7"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("kube-api-qps"));
}

}  // namespace
}  // namespace dra
