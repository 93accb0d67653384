#include "lib/cdcontroller/render.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::cdcontroller {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

k8s::ComputeDomain Domain(const std::string& mode = "") {
  k8s::ComputeDomain cd;
  cd.metadata.name = "cd1";
  cd.metadata.namespace_name = "team-a";
  cd.metadata.uid = "0e3c-uid";
  cd.spec.channel.resource_claim_template_name = "cd1-channel";
  cd.spec.channel.allocation_mode = mode;
  return cd;
}

ControllerConfig Config() {
  ControllerConfig c;
  c.driver_namespace = "nvidia-dra";
  c.image_name = "registry.example/dra:v1";
  c.image_pull_policy = "Always";
  c.log_verbosity_cd_daemon = "6";
  c.max_nodes_per_imex_domain = 18;
  c.daemon_readiness_period = absl::Seconds(2);
  c.feature_gates_text = "ComputeDomainCliques=true,IMEXDaemonsWithDNSNames=true";
  return c;
}

const json& EnvNamed(const json& env, const std::string& name) {
  for (const json& e : env) {
    if (e["name"] == name) return e;
  }
  static const json kNone;
  ADD_FAILURE() << "no env " << name;
  return kNone;
}

TEST(RenderTest, DaemonSet) {
  absl::StatusOr<json> ds = RenderDaemonSet(Domain(), Config());
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)["apiVersion"], "apps/v1");
  EXPECT_EQ((*ds)["kind"], "DaemonSet");
  const json& meta = (*ds)["metadata"];
  EXPECT_EQ(meta["name"], "computedomain-daemon-0e3c-uid");
  EXPECT_EQ(meta["namespace"], "nvidia-dra");
  EXPECT_EQ(meta["labels"], json({{"resource.nvidia.com/computeDomain", "0e3c-uid"}}));
  EXPECT_EQ(meta["finalizers"], json({"resource.nvidia.com/computeDomain"}));
  EXPECT_FALSE(meta.contains("ownerReferences"));
  const json& spec = (*ds)["spec"];
  EXPECT_EQ(spec["selector"]["matchLabels"], meta["labels"]);
  EXPECT_EQ(spec["template"]["metadata"]["labels"], meta["labels"]);
  const json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "compute-domain-daemon-service-account");
  EXPECT_EQ(pod["nodeSelector"], meta["labels"]);
  EXPECT_FALSE(pod.contains("imagePullSecrets"));  // none configured
  EXPECT_EQ(pod["tolerations"].size(), 3u);
  for (const json& t : pod["tolerations"]) EXPECT_EQ(t["operator"], "Exists");
  EXPECT_EQ(pod["resourceClaims"], json::parse(R"([{"name":"compute-domain-daemon",
                             "resourceClaimTemplateName":"computedomain-daemon-0e3c-uid"}])"));
  ASSERT_EQ(pod["containers"].size(), 1u);
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["name"], "compute-domain-daemon");
  EXPECT_EQ(c["image"], "registry.example/dra:v1");
  EXPECT_EQ(c["imagePullPolicy"], "Always");
  EXPECT_EQ(c["command"], json({"compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "run"}));
  EXPECT_EQ(c["resources"]["claims"], json::parse(R"([{"name":"compute-domain-daemon"}])"));
  const json& env = c["env"];
  EXPECT_EQ(EnvNamed(env, "LOG_VERBOSITY")["value"], "6");
  EXPECT_EQ(EnvNamed(env, "MAX_NODES_PER_IMEX_DOMAIN")["value"], "18");
  EXPECT_EQ(EnvNamed(env, "NVIDIA_VISIBLE_DEVICES")["value"], "void");
  EXPECT_EQ(EnvNamed(env, "FEATURE_GATES")["value"],
            "ComputeDomainCliques=true,IMEXDaemonsWithDNSNames=true");
  EXPECT_EQ(EnvNamed(env, "NODE_NAME")["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
  EXPECT_EQ(EnvNamed(env, "POD_IP")["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP");
  EXPECT_EQ(EnvNamed(env, "POD_UID")["valueFrom"]["fieldRef"]["fieldPath"], "metadata.uid");
  EXPECT_EQ(EnvNamed(env, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
  EXPECT_EQ(EnvNamed(env, "POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.namespace");
  const json check = {"compute-domain-daemon", "-v", "$(LOG_VERBOSITY)", "check"};
  EXPECT_EQ(c["startupProbe"]["exec"]["command"], check);
  EXPECT_EQ(c["startupProbe"]["periodSeconds"], 1);
  EXPECT_EQ(c["startupProbe"]["failureThreshold"], 1200);
  EXPECT_EQ(c["livenessProbe"]["periodSeconds"], 60);
  EXPECT_EQ(c["livenessProbe"]["failureThreshold"], 20);
  EXPECT_EQ(c["readinessProbe"]["exec"]["command"], check);
  EXPECT_EQ(c["readinessProbe"]["periodSeconds"], 2);  // --daemon-readiness-period
  EXPECT_EQ(c["readinessProbe"]["failureThreshold"], 1);
}

TEST(RenderTest, DaemonSetPullSecrets) {
  ControllerConfig c = Config();
  c.image_pull_secrets = {"a", "b"};
  absl::StatusOr<json> ds = RenderDaemonSet(Domain(), c);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)["spec"]["template"]["spec"]["imagePullSecrets"],
            json::parse(R"([{"name":"a"},{"name":"b"}])"));
}

TEST(RenderTest, ValuesCannotChangeTheDocumentStructure) {
  ControllerConfig c = Config();
  c.image_name = R"(x", "privileged": true, "y": ")";
  absl::StatusOr<json> ds = RenderDaemonSet(Domain(), c);
  ASSERT_TRUE(ds.ok()) << ds.status();
  const json& container = (*ds)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], c.image_name);
  EXPECT_FALSE(container.contains("privileged"));
}

TEST(RenderTest, DaemonClaimTemplate) {
  absl::StatusOr<json> rct = RenderDaemonClaimTemplate(Domain(), Config());
  ASSERT_TRUE(rct.ok()) << rct.status();
  EXPECT_EQ(*rct, json::parse(R"({
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {
      "name": "computedomain-daemon-0e3c-uid",
      "namespace": "nvidia-dra",
      "labels": {"resource.nvidia.com/computeDomain": "0e3c-uid",
                 "resource.nvidia.com/computeDomainTarget": "Daemon"},
      "finalizers": ["resource.nvidia.com/computeDomain"]
    },
    "spec": {"spec": {"devices": {
      "requests": [{"name": "daemon",
                    "exactly": {"deviceClassName": "compute-domain-daemon.nvidia.com"}}],
      "config": [{"requests": ["daemon"], "opaque": {
        "driver": "compute-domain.nvidia.com",
        "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                       "kind": "ComputeDomainDaemonConfig", "domainID": "0e3c-uid"}}}]
    }}}
  })"));
}

TEST(RenderTest, WorkloadClaimTemplate) {
  absl::StatusOr<json> rct = RenderWorkloadClaimTemplate(Domain("All"), Config());
  ASSERT_TRUE(rct.ok()) << rct.status();
  EXPECT_EQ(*rct, json::parse(R"({
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {
      "name": "cd1-channel",
      "namespace": "team-a",
      "labels": {"resource.nvidia.com/computeDomain": "0e3c-uid",
                 "resource.nvidia.com/computeDomainTarget": "Workload"},
      "finalizers": ["resource.nvidia.com/computeDomain"]
    },
    "spec": {"spec": {"devices": {
      "requests": [{"name": "channel",
                    "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}}],
      "config": [{"requests": ["channel"], "opaque": {
        "driver": "compute-domain.nvidia.com",
        "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                       "kind": "ComputeDomainChannelConfig", "domainID": "0e3c-uid",
                       "allocationMode": "All"}}}]
    }}}
  })"));
}

TEST(RenderTest, WorkloadAllocationModeDefaultsToSingleAndIsSingleWhenHostManaged) {
  absl::StatusOr<json> rct = RenderWorkloadClaimTemplate(Domain(""), Config());
  ASSERT_TRUE(rct.ok());
  const json& params = (*rct)["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"];
  EXPECT_EQ(params["allocationMode"], "Single");
  ControllerConfig host = Config();
  host.imex_mode = "hostManaged";
  rct = RenderWorkloadClaimTemplate(Domain("All"), host);
  ASSERT_TRUE(rct.ok());
  EXPECT_EQ(
      (*rct)["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]["allocationMode"],
      "Single");
}

TEST(RenderTest, SubstitutePlaceholdersErrors) {
  EXPECT_THAT(SubstitutePlaceholders("a {{X}} b", {}).status().message(),
              HasSubstr("no value for placeholder {{X}}"));
  EXPECT_THAT(SubstitutePlaceholders("a {{X b", {{"X", "1"}}).status().message(),
              HasSubstr("unterminated placeholder"));
  EXPECT_EQ(*SubstitutePlaceholders("{{X}}-{{Y}}", {{"X", "1"}, {"Y", "\"2\""}}), "1-\"2\"");
}

}  // namespace
}  // namespace dra::cdcontroller
