#include "lib/cdcontroller/config.h"

#include <map>
#include <optional>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/api/driver_gates.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"

namespace dra::cdcontroller {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  absl::Status status;
  ProcessOptions options;
  std::string help;
};

Parsed Parse(std::vector<const char*> args, const std::map<std::string, std::string>& env = {}) {
  Parsed p;
  FeatureGates gates;
  EXPECT_TRUE(api::RegisterDriverFeatureGates(gates, "compute-domain-controller").ok());
  Flags flags("compute-domain-controller", "test");
  AddControllerFlags(flags, &p.options, &gates);
  flags.SetEnvLookupForTest([env](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
  std::ostringstream out;
  flags.SetOutputForTest(&out);
  args.insert(args.begin(), "compute-domain-controller");
  absl::StatusOr<Flags::ParseResult> r = flags.Parse(static_cast<int>(args.size()), args.data());
  p.status = r.status();
  if (p.status.ok()) {
    p.status = ValidateConfig(p.options.controller, gates.Enabled("HostManagedIMEXDaemon"));
  }
  p.help = flags.Help();
  return p;
}

TEST(ConfigTest, DefaultsMatchTheGoController) {
  Parsed p = Parse({"--pod-name=c", "--image-name=i", "--log-verbosity-cd-daemon=4"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  const ProcessOptions& o = p.options;
  EXPECT_EQ(o.controller.driver_namespace, "default");
  EXPECT_EQ(o.controller.max_nodes_per_imex_domain, 18);
  EXPECT_EQ(o.controller.imex_mode, "driverManaged");
  EXPECT_EQ(o.controller.imex_isolation, "domain");
  EXPECT_EQ(o.controller.image_pull_policy, "IfNotPresent");
  EXPECT_EQ(o.controller.daemon_readiness_period, absl::Seconds(10));
  EXPECT_EQ(o.metrics_path, "/metrics");
  EXPECT_EQ(o.kube_api_qps, 5);
  EXPECT_EQ(o.kube_api_burst, 10);
  EXPECT_FALSE(o.leader_election_enabled);
  EXPECT_EQ(o.leader_election_namespace, "default");
  EXPECT_EQ(o.leader_election_name, "nvidia-compute-domain-controller");
  EXPECT_EQ(o.lease_duration, absl::Seconds(15));
  EXPECT_EQ(o.renew_deadline, absl::Seconds(10));
  EXPECT_EQ(o.retry_period, absl::Seconds(2));
}

TEST(ConfigTest, EveryFlagHasItsEnvVar) {
  Parsed p = Parse({}, {{"POD_NAME", "c"},
                        {"NAMESPACE", "drv"},
                        {"IMAGE_NAME", "img"},
                        {"LOG_VERBOSITY_CD_DAEMON", "5"},
                        {"IMAGE_PULL_POLICY", "Never"},
                        {"CD_DAEMON_IMAGE_PULL_SECRET_NAMES", " s1, s2 "},
                        {"MAX_NODES_PER_IMEX_DOMAIN", "4"},
                        {"DAEMON_READINESS_PERIOD", "2s"},
                        {"ADDITIONAL_NAMESPACES", "old1,old2"},
                        {"LEADER_ELECTION_ENABLED", "true"},
                        {"LEADER_ELECTION_LEASE_DURATION", "30s"},
                        {"KUBE_API_QPS", "20"},
                        {"HTTP_ENDPOINT", ":8080"}});
  ASSERT_TRUE(p.status.ok()) << p.status;
  const ControllerConfig& c = p.options.controller;
  EXPECT_EQ(c.pod_name, "c");
  EXPECT_EQ(c.driver_namespace, "drv");
  EXPECT_EQ(c.image_pull_policy, "Never");
  EXPECT_EQ(c.image_pull_secrets, (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(c.max_nodes_per_imex_domain, 4);
  EXPECT_EQ(c.daemon_readiness_period, absl::Seconds(2));
  EXPECT_EQ(c.additional_namespaces, (std::vector<std::string>{"old1", "old2"}));
  EXPECT_TRUE(p.options.leader_election_enabled);
  EXPECT_EQ(p.options.lease_duration, absl::Seconds(30));
  EXPECT_EQ(p.options.kube_api_qps, 20);
  EXPECT_EQ(p.options.http_endpoint, ":8080");
}

TEST(ConfigTest, BadValuesSayWhatIsAllowed) {
  const std::vector<const char*> base = {"--pod-name=c", "--image-name=i",
                                         "--log-verbosity-cd-daemon=4"};
  struct Case {
    const char* arg;
    const char* want;
  } cases[] = {
      {"--imex-isolation=channel", "not supported yet"},
      {"--imex-isolation=node", "allowed value: domain"},
      {"--imex-mode=foo", "allowed values are driverManaged, hostManaged"},
      {"--imex-mode=hostManaged", "requires the feature gate HostManagedIMEXDaemon=true"},
      {"--image-pull-policy=Sometimes", "allowed values are Always, IfNotPresent, Never"},
      {"--daemon-readiness-period=500ms", "whole number of seconds >= 1s"},
      {"--max-nodes-per-imex-domain=0", "must be >= 1"},
      {"--log-verbosity-cd-daemon=high", "expected an integer >= 0"},
  };
  for (const Case& c : cases) {
    std::vector<const char*> args = base;
    args.push_back(c.arg);
    Parsed p = Parse(args);
    EXPECT_THAT(p.status.message(), HasSubstr(c.want)) << c.arg;
  }
  Parsed missing = Parse({"--pod-name=c", "--log-verbosity-cd-daemon=4"});
  EXPECT_THAT(missing.status.message(), HasSubstr("--image-name (env IMAGE_NAME) is required"));
  Parsed no_pod = Parse({"--image-name=i", "--log-verbosity-cd-daemon=4"});
  EXPECT_THAT(no_pod.status.message(), HasSubstr("--pod-name"));
}

TEST(ConfigTest, HostManagedNeedsNoImageWithTheGate) {
  Parsed p = Parse(
      {"--pod-name=c", "--imex-mode=hostManaged", "--feature-gates=HostManagedIMEXDaemon=true"});
  // The gate is not implemented in this version yet: setting it is refused by the gate table.
  if (!api::DriverGateImplemented("HostManagedIMEXDaemon")) {
    EXPECT_THAT(p.status.message(), HasSubstr("HostManagedIMEXDaemon"));
  } else {
    EXPECT_TRUE(p.status.ok()) << p.status;
  }
}

TEST(ConfigTest, HelpListsEveryFlagWithItsEnvVar) {
  Parsed p = Parse({"--pod-name=c", "--image-name=i", "--log-verbosity-cd-daemon=4"});
  for (const char* s : {"--pod-name string (env POD_NAME",
                        "--namespace string (env NAMESPACE",
                        "--image-name string (env IMAGE_NAME",
                        "(env IMAGE_PULL_POLICY",
                        "(env CD_DAEMON_IMAGE_PULL_SECRET_NAMES",
                        "(env LOG_VERBOSITY_CD_DAEMON",
                        "(env MAX_NODES_PER_IMEX_DOMAIN",
                        "(env IMEX_MODE",
                        "(env IMEX_ISOLATION",
                        "(env DAEMON_READINESS_PERIOD",
                        "(env ADDITIONAL_NAMESPACES",
                        "(env HTTP_ENDPOINT",
                        "(env METRICS_PATH",
                        "(env PPROF_PATH",
                        "(env LEADER_ELECTION_ENABLED",
                        "(env LEADER_ELECTION_LEASE_LOCK_NAMESPACE",
                        "(env LEADER_ELECTION_LEASE_LOCK_NAME",
                        "(env LEADER_ELECTION_LEASE_DURATION",
                        "(env LEADER_ELECTION_RENEW_DEADLINE",
                        "(env LEADER_ELECTION_RETRY_PERIOD",
                        "(env KUBECONFIG",
                        "(env KUBE_API_QPS",
                        "(env KUBE_API_BURST",
                        "(env FEATURE_GATES",
                        "(env VERBOSITY"}) {
    EXPECT_THAT(p.help, HasSubstr(s));
  }
  EXPECT_THAT(p.help, ::testing::Not(HasSubstr("watch-namespace")));  // tests only
}

}  // namespace
}  // namespace dra::cdcontroller
