#include "lib/cdcontroller/config.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/common/flags.h"

namespace dra::cdcontroller {

absl::Status ValidateConfig(const ControllerConfig& c, bool host_managed_gate) {
  if (c.imex_mode != kImexModeDriverManaged && c.imex_mode != kImexModeHostManaged) {
    return absl::InvalidArgumentError(absl::StrCat("--imex-mode (env IMEX_MODE) \"", c.imex_mode,
                                                   "\": allowed values are driverManaged, "
                                                   "hostManaged"));
  }
  if (c.imex_mode == kImexModeHostManaged && !host_managed_gate) {
    return absl::InvalidArgumentError(
        "--imex-mode=hostManaged requires the feature gate HostManagedIMEXDaemon=true");
  }
  if (c.imex_isolation == kImexIsolationChannel) {
    return absl::InvalidArgumentError(
        "--imex-isolation (env IMEX_ISOLATION) \"channel\": not supported yet; allowed value: "
        "domain");
  }
  if (!c.imex_isolation.empty() && c.imex_isolation != kImexIsolationDomain) {
    return absl::InvalidArgumentError(absl::StrCat("--imex-isolation (env IMEX_ISOLATION) \"",
                                                   c.imex_isolation, "\": allowed value: domain"));
  }
  if (c.driver_namespace.empty()) {
    return absl::InvalidArgumentError("--namespace (env NAMESPACE) must not be empty");
  }
  if (!c.host_managed()) {
    if (c.image_name.empty()) {
      return absl::InvalidArgumentError("--image-name (env IMAGE_NAME) is required");
    }
    if (c.log_verbosity_cd_daemon.empty()) {
      return absl::InvalidArgumentError(
          "--log-verbosity-cd-daemon (env LOG_VERBOSITY_CD_DAEMON) is required");
    }
    int v = 0;
    if (!absl::SimpleAtoi(c.log_verbosity_cd_daemon, &v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--log-verbosity-cd-daemon (env LOG_VERBOSITY_CD_DAEMON) \"",
                       c.log_verbosity_cd_daemon, "\": expected an integer >= 0"));
    }
  }
  if (c.max_nodes_per_imex_domain < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-nodes-per-imex-domain (env MAX_NODES_PER_IMEX_DOMAIN) ",
                     c.max_nodes_per_imex_domain, ": must be >= 1"));
  }
  if (c.image_pull_policy != "Always" && c.image_pull_policy != "IfNotPresent" &&
      c.image_pull_policy != "Never") {
    return absl::InvalidArgumentError(
        absl::StrCat("--image-pull-policy (env IMAGE_PULL_POLICY) \"", c.image_pull_policy,
                     "\": allowed values are Always, IfNotPresent, Never"));
  }
  if (c.daemon_readiness_period < absl::Seconds(1) ||
      c.daemon_readiness_period != absl::Seconds(absl::ToInt64Seconds(c.daemon_readiness_period))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--daemon-readiness-period (env DAEMON_READINESS_PERIOD) ",
                     absl::FormatDuration(c.daemon_readiness_period),
                     ": must be a whole number of seconds >= 1s (a probe's periodSeconds)"));
  }
  return absl::OkStatus();
}

void AddControllerFlags(Flags& flags, ProcessOptions* o, FeatureGates* gates) {
  ControllerConfig* c = &o->controller;
  flags
      .AddString("pod-name", "POD_NAME", &c->pod_name,
                 "Name of this controller's pod; the leader-election identity is "
                 "<pod-name>-<random UUID>.")
      .Required();
  flags.AddString("namespace", "NAMESPACE", &c->driver_namespace,
                  "The driver's namespace: the IMEX daemons' DaemonSets and ResourceClaimTemplates "
                  "are created there, and the ComputeDomainCliques are read there.");
  flags.AddStringList(
      "additional-namespaces", "ADDITIONAL_NAMESPACES", &c->additional_namespaces,
      "Comma-separated namespaces where DaemonSets of an earlier installation may "
      "live; they are deleted with their ComputeDomain (nothing is created there).");
  flags.AddString("image-name", "IMAGE_NAME", &c->image_name,
                  "Image of the IMEX daemon pods (required in driverManaged mode).");
  flags.AddString("image-pull-policy", "IMAGE_PULL_POLICY", &c->image_pull_policy,
                  "imagePullPolicy of the IMEX daemon container: Always, IfNotPresent or Never.");
  flags.AddStringList("cd-daemon-image-pull-secret-names", "CD_DAEMON_IMAGE_PULL_SECRET_NAMES",
                      &c->image_pull_secrets,
                      "Comma-separated names of Secrets the IMEX daemon pods pull their image "
                      "with.");
  flags.AddString("log-verbosity-cd-daemon", "LOG_VERBOSITY_CD_DAEMON", &c->log_verbosity_cd_daemon,
                  "-v of the IMEX daemon pods (required in driverManaged mode).");
  flags.AddInt("max-nodes-per-imex-domain", "MAX_NODES_PER_IMEX_DOMAIN",
               &c->max_nodes_per_imex_domain,
               "Most nodes of one IMEX domain (clique); passed on to the daemons.");
  flags.AddString("imex-mode", "IMEX_MODE", &c->imex_mode,
                  "driverManaged (the driver runs an IMEX daemon per ComputeDomain) or hostManaged "
                  "(the hosts run nvidia-imex; needs the HostManagedIMEXDaemon gate).");
  flags.AddString("imex-isolation", "IMEX_ISOLATION", &c->imex_isolation,
                  "IMEX isolation: domain (channel is not supported yet).");
  flags.AddDuration("daemon-readiness-period", "DAEMON_READINESS_PERIOD",
                    &c->daemon_readiness_period,
                    "periodSeconds of the IMEX daemon pods' readiness probe (whole seconds).");
  flags.AddBool("binding-conditions", "BINDING_CONDITIONS", &c->binding_conditions,
                "Report on ResourceClaims whose IMEX channel devices carry device binding "
                "conditions (KEP-5007) when the domain's IMEX daemon on the allocated node is "
                "Ready, so that the scheduler binds the pod only then; labels that node for the "
                "domain first. Watches ResourceClaims of all namespaces. Ignored with "
                "--imex-mode=hostManaged.");
  flags
      .AddString("watch-namespace", "WATCH_NAMESPACE", &c->watch_namespace,
                 "Tests only: reconcile only ComputeDomains of this namespace; disables the "
                 "cleanup of node labels of unknown ComputeDomains.")
      .Hidden();
  flags.AddKubeClientFlags(&o->kubeconfig, &o->kube_api_qps, &o->kube_api_burst);
  flags.AddMetricsServerFlags(&o->http_endpoint, &o->metrics_path);
  flags.AddString("pprof-path", "PPROF_PATH", &o->pprof_path,
                  "Accepted for compatibility with the Go driver; there is no pprof in this "
                  "implementation (a non-empty value logs a warning).");
  flags.AddBool("leader-election-enabled", "LEADER_ELECTION_ENABLED", &o->leader_election_enabled,
                "Run only while holding the leader Lease, so that replicas stand by.");
  flags.AddString("leader-election-lease-lock-namespace", "LEADER_ELECTION_LEASE_LOCK_NAMESPACE",
                  &o->leader_election_namespace, "Namespace of the leader Lease.");
  flags.AddString("leader-election-lease-lock-name", "LEADER_ELECTION_LEASE_LOCK_NAME",
                  &o->leader_election_name, "Name of the leader Lease.");
  flags.AddDuration("leader-election-lease-duration", "LEADER_ELECTION_LEASE_DURATION",
                    &o->lease_duration,
                    "How long standbys wait after the last renewal before taking over.");
  flags.AddDuration("leader-election-renew-deadline", "LEADER_ELECTION_RENEW_DEADLINE",
                    &o->renew_deadline,
                    "How long the leader keeps trying to renew before it gives up (and exits).");
  flags.AddDuration("leader-election-retry-period", "LEADER_ELECTION_RETRY_PERIOD",
                    &o->retry_period, "Interval between acquire and renew attempts.");
  flags.AddLoggingFlags();
  flags.AddFeatureGatesFlag(gates);
}

}  // namespace dra::cdcontroller
