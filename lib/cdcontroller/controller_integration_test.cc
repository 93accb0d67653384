// The controller in-process against the local cluster's API server: objects created for a
// ComputeDomain, status from a hand-made clique and daemon pods, clique pruning, recreation of a
// removed object, finalizer-ordered deletion including node labels, and the cleanup of objects
// and node labels of domains that do not exist. Each test uses its own namespaces; the only
// cluster-scoped objects touched are Nodes the tests create themselves.

#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/cdcontroller/controller.h"
#include "lib/cdcontroller/render.h"
#include "lib/cdcontroller/testing_cluster.h"
#include "lib/k8s/errors.h"
#include "test/support/crds.h"

namespace dra::cdcontroller {
namespace {

using ::dra::cdcontroller::testing::AdminClient;
using ::dra::cdcontroller::testing::ComputeDomainManifest;
using ::dra::cdcontroller::testing::DaemonPodManifest;
using ::dra::cdcontroller::testing::Eventually;
using ::dra::cdcontroller::testing::FakeNode;
using ::dra::cdcontroller::testing::kConfigMaps;
using ::dra::cdcontroller::testing::RandomSuffix;
using ::dra::cdcontroller::testing::ScopedNamespace;
using json = nlohmann::json;

bool Exists(k8s::Client* c, const k8s::ResourceInfo& r, const std::string& ns,
            const std::string& name) {
  return c->Get(r, ns, name).ok();
}
bool Gone(k8s::Client* c, const k8s::ResourceInfo& r, const std::string& ns,
          const std::string& name) {
  return absl::IsNotFound(c->Get(r, ns, name).status());
}

class ControllerIntegrationTest : public ::testing::Test {
 protected:
  // The ComputeDomain CRDs: every run starts from an empty control plane.
  static void SetUpTestSuite() {
    absl::Status crds = dra::testing::InstallChartCrds();
    ASSERT_TRUE(crds.ok()) << crds;
  }

  void StartController() {
    ControllerConfig c;
    c.pod_name = "itest";
    c.driver_namespace = driver_ns_.name();
    c.watch_namespace = user_ns_.name();
    c.image_name = "registry.invalid/dra:test";
    c.log_verbosity_cd_daemon = "4";
    c.daemon_readiness_period = absl::Seconds(3);
    c.feature_gates_text = "ComputeDomainCliques=true";
    // Proves the status follows events: the periodic safety net would be far too late.
    c.status_resync = absl::Minutes(10);
    c.node_label_cleanup_filter = [this](absl::string_view uid) {
      absl::MutexLock l(&mu_);
      return test_uids_.contains(std::string(uid));
    };
    auto ctrl = Controller::Create(client_.get(), c, &registry_);
    ASSERT_TRUE(ctrl.ok()) << ctrl.status();
    controller_ = *std::move(ctrl);
    ASSERT_TRUE(controller_->Start(absl::Seconds(30)).ok());
  }
  void TearDown() override {
    if (controller_) controller_->Stop();
  }
  void AllowCleanup(const std::string& uid) {
    absl::MutexLock l(&mu_);
    test_uids_.insert(uid);
  }
  json GetCd(const std::string& name) {
    auto j = client_->Get(k8s::ComputeDomain::kResource, user_ns_.name(), name);
    return j.ok() ? *j : json();
  }

  std::unique_ptr<k8s::Client> client_ = AdminClient();
  ScopedNamespace driver_ns_{client_.get(), "h3-cdc-drv"};
  ScopedNamespace user_ns_{client_.get(), "h3-cdc-ws"};
  metrics::Registry registry_;
  std::unique_ptr<Controller> controller_;
  absl::Mutex mu_;
  std::set<std::string> test_uids_;
};

TEST_F(ControllerIntegrationTest, LifecycleOfAComputeDomain) {
  StartController();
  const std::string& drv = driver_ns_.name();
  const std::string& ws = user_ns_.name();
  auto created = client_->Create(k8s::ComputeDomain::kResource, ws,
                                 ComputeDomainManifest(ws, "cd1", 2, "cd1-channel", "All"));
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string uid = (*created)["metadata"]["uid"];
  AllowCleanup(uid);
  const std::string daemon_name = DaemonObjectName(uid);

  // Finalizer and the three objects.
  absl::Duration took = Eventually([&] {
    json cd = GetCd("cd1");
    return cd.is_object() &&
           cd["metadata"].value("finalizers", json::array()) ==
               json({"resource.nvidia.com/computeDomain"}) &&
           Exists(client_.get(), k8s::DaemonSet::kResource, drv, daemon_name) &&
           Exists(client_.get(), k8s::ResourceClaimTemplate::kResource, drv, daemon_name) &&
           Exists(client_.get(), k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel");
  });
  ASSERT_NE(took, absl::InfiniteDuration()) << "objects not created";
  std::printf("timing: ComputeDomain created -> finalizer, DaemonSet and both RCTs: %s\n",
              absl::FormatDuration(took).c_str());

  json ds = *client_->Get(k8s::DaemonSet::kResource, drv, daemon_name);
  EXPECT_EQ(ds["metadata"]["labels"][std::string(k8s::kComputeDomainLabel)], uid);
  EXPECT_EQ(ds["metadata"]["finalizers"], json({"resource.nvidia.com/computeDomain"}));
  const json& pod_spec = ds["spec"]["template"]["spec"];
  EXPECT_EQ(pod_spec["nodeSelector"][std::string(k8s::kComputeDomainLabel)], uid);
  EXPECT_EQ(pod_spec["resourceClaims"][0]["resourceClaimTemplateName"], daemon_name);
  EXPECT_EQ(pod_spec["containers"][0]["image"], "registry.invalid/dra:test");
  EXPECT_EQ(pod_spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(pod_spec["containers"][0]["readinessProbe"]["periodSeconds"], 3);
  json daemon_rct = *client_->Get(k8s::ResourceClaimTemplate::kResource, drv, daemon_name);
  EXPECT_EQ(daemon_rct["metadata"]["labels"][std::string(k8s::kComputeDomainTargetLabel)],
            "Daemon");
  EXPECT_EQ(daemon_rct["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]["domainID"],
            uid);
  json workload_rct = *client_->Get(k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel");
  const json& params = workload_rct["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"];
  EXPECT_EQ(params["kind"], "ComputeDomainChannelConfig");
  EXPECT_EQ(params["domainID"], uid);
  EXPECT_EQ(params["allocationMode"], "All");
  EXPECT_EQ(workload_rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"],
            "compute-domain-default-channel.nvidia.com");

  // No daemons yet: 0 of 2 nodes.
  ASSERT_NE(Eventually([&] { return GetCd("cd1")["status"].value("status", "") == "NotReady"; }),
            absl::InfiniteDuration());

  // Two fabric daemons (pods labelled with their clique ID, as the daemons label them) and a
  // non-fabric one. The controller writes the clique from the pods.
  json owner = *client_->Create(
      kConfigMaps, drv,
      {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "pod-owner"}}}});
  const std::string node_a = "h3-absent-node-a-" + RandomSuffix();
  const std::string node_b = "h3-absent-node-b-" + RandomSuffix();
  const std::string node_c = "h3-absent-node-c-" + RandomSuffix();
  for (const auto& [name, node, clique] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"daemon-a", node_a, "uuid.7"},
           {"daemon-b", node_b, "uuid.7"},
           {"daemon-c", node_c, ""}}) {
    auto p = client_->Create(k8s::Pod::kResource, drv,
                             DaemonPodManifest(drv, name, uid, clique, node, owner));
    ASSERT_TRUE(p.ok()) << p.status();
  }
  // The non-fabric daemon is Ready with an IP (as its kubelet would report).
  const std::map<std::string, std::string> ips = {
      {"daemon-a", "10.77.0.1"}, {"daemon-b", "10.77.0.2"}, {"daemon-c", "10.77.0.3"}};
  auto set_pod_ready = [&](const std::string& name, bool ready) {
    json pod = *client_->Get(k8s::Pod::kResource, drv, name);
    pod["status"]["podIP"] = ips.at(name);
    pod["status"]["podIPs"] = json::array({{{"ip", ips.at(name)}}});
    pod["status"]["conditions"] =
        json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}});
    auto r = client_->UpdateStatus(k8s::Pod::kResource, drv, pod);
    ASSERT_TRUE(r.ok()) << r.status();
  };
  set_pod_ready("daemon-c", true);
  // The fabric daemons' pods are Ready too: a node whose daemon pod is not Ready is listed
  // NotReady whatever its clique entry says (a dead daemon cannot update its entry).
  set_pod_ready("daemon-a", true);
  set_pod_ready("daemon-b", true);
  const absl::Time clique_ready = absl::Now();
  // The controller lists both fabric nodes in their clique, indices in node-name order, Ready
  // from the pods' condition, each pod an owner.
  ASSERT_NE(Eventually([&] {
              auto c = client_->Get(k8s::ComputeDomainClique::kResource, drv,
                                    k8s::CliqueObjectName(uid, "uuid.7"));
              return c.ok() && (*c)["daemons"].size() == 2 &&
                     (*c)["daemons"][1].value("status", "") == "Ready";
            }),
            absl::InfiniteDuration());
  {
    auto c = client_->Get(k8s::ComputeDomainClique::kResource, drv,
                          k8s::CliqueObjectName(uid, "uuid.7"));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)["daemons"][0],
              json::parse(absl::StrCat(
                  R"({"nodeName":")", node_a,
                  R"(","ipAddress":"10.77.0.1","cliqueID":"uuid.7","index":0,"status":"Ready"})")));
    EXPECT_EQ((*c)["daemons"][1]["nodeName"], node_b);
    EXPECT_EQ((*c)["daemons"][1]["index"], 1);
    EXPECT_EQ((*c)["metadata"]["labels"][std::string(k8s::kComputeDomainLabel)], uid);
    EXPECT_EQ((*c)["metadata"]["labels"][std::string(k8s::kComputeDomainCliqueLabel)], "uuid.7");
    EXPECT_EQ((*c)["metadata"]["ownerReferences"].size(), 2u);
  }
  took = Eventually([&] {
    json cd = GetCd("cd1");
    return cd["status"].value("status", "") == "Ready" &&
           cd["status"].value("nodes", json::array()).size() == 3;
  });
  ASSERT_NE(took, absl::InfiniteDuration()) << GetCd("cd1")["status"].dump();
  std::printf("timing: clique with 2 Ready daemons created -> ComputeDomain Ready: %s\n",
              absl::FormatDuration(absl::Now() - clique_ready).c_str());
  EXPECT_THAT(registry_.Render(),
              ::testing::HasSubstr("nvidia_dra_compute_domain_info{status=\"Ready\"} 1"));
  json nodes = GetCd("cd1")["status"]["nodes"];
  std::map<std::string, json> by_name;
  for (const json& n : nodes) by_name[n["name"]] = n;
  EXPECT_EQ(by_name[node_a],
            json::parse(absl::StrCat(
                R"({"name":")", node_a,
                R"(","ipAddress":"10.77.0.1","cliqueID":"uuid.7","index":0,"status":"Ready"})")));
  EXPECT_EQ(by_name[node_b]["index"], 1);
  EXPECT_EQ(by_name[node_c],
            json::parse(absl::StrCat(
                R"({"name":")", node_c,
                R"(","ipAddress":"10.77.0.3","cliqueID":"","index":-1,"status":"Ready"})")));

  // The non-fabric daemon turns NotReady: the domain follows.
  set_pod_ready("daemon-c", false);
  ASSERT_NE(Eventually([&] { return GetCd("cd1")["status"].value("status", "") == "NotReady"; }),
            absl::InfiniteDuration());
  set_pod_ready("daemon-c", true);
  ASSERT_NE(Eventually([&] { return GetCd("cd1")["status"].value("status", "") == "Ready"; }),
            absl::InfiniteDuration());

  // Daemon b's pod goes: the controller drops its clique entry, and with 2 of 2 nodes left the
  // domain stays Ready.
  ASSERT_TRUE(
      client_->Delete(k8s::Pod::kResource, drv, "daemon-b", {.grace_period_seconds = 0}).ok());
  ASSERT_NE(Eventually([&] {
              auto c = client_->Get(k8s::ComputeDomainClique::kResource, drv,
                                    k8s::CliqueObjectName(uid, "uuid.7"));
              return c.ok() && (*c)["daemons"].size() == 1 &&
                     (*c)["daemons"][0]["nodeName"] == node_a;
            }),
            absl::InfiniteDuration());
  ASSERT_NE(Eventually([&] {
              json cd = GetCd("cd1");
              return cd["status"].value("nodes", json::array()).size() == 2;
            }),
            absl::InfiniteDuration());
  EXPECT_EQ(GetCd("cd1")["status"]["status"], "Ready");

  // A removed workload RCT of a live domain comes back.
  ASSERT_TRUE(client_->Delete(k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel").ok());
  {
    auto rct = client_->Get(k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel");
    // Its finalizer keeps it until the controller lets go; drop it as an admin would.
    if (rct.ok()) {
      json patch = {{"metadata", {{"finalizers", json::array()}}}};
      (void)client_->MergePatch(k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel", patch);
    }
  }
  ASSERT_NE(Eventually([&] {
              auto rct = client_->Get(k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel");
              return rct.ok() && !(*rct)["metadata"].contains("deletionTimestamp");
            }),
            absl::InfiniteDuration());

  // Deletion: objects, node label and finalizer go, in order.
  FakeNode node(client_.get(), uid);
  ASSERT_EQ(node.Label(), uid);
  const absl::Time deleted = absl::Now();
  ASSERT_TRUE(client_->Delete(k8s::ComputeDomain::kResource, ws, "cd1").ok());
  took = Eventually([&] { return Gone(client_.get(), k8s::ComputeDomain::kResource, ws, "cd1"); });
  ASSERT_NE(took, absl::InfiniteDuration()) << GetCd("cd1").dump();
  std::printf("timing: ComputeDomain deleted -> gone (objects, node label, finalizer): %s\n",
              absl::FormatDuration(absl::Now() - deleted).c_str());
  EXPECT_TRUE(Gone(client_.get(), k8s::DaemonSet::kResource, drv, daemon_name));
  EXPECT_TRUE(Gone(client_.get(), k8s::ResourceClaimTemplate::kResource, drv, daemon_name));
  EXPECT_TRUE(Gone(client_.get(), k8s::ResourceClaimTemplate::kResource, ws, "cd1-channel"));
  EXPECT_EQ(node.Label(), "");

  const std::string metrics = registry_.Render();
  EXPECT_THAT(metrics, ::testing::HasSubstr("nvidia_dra_compute_domain_info{status=\"Ready\"} 0"));
}

// A domain deleted right after its creation: the API server's DELETE may read it before the
// controller's finalizer patch lands and then remove it with that finalizer on
// (kubernetes/kubernetes#77988), after the controller may already have created its daemon
// objects. Those objects carry no owner reference (they live in another namespace), so without
// the controller's own cleanup they would stay until the periodic cleanup, 10 minutes later.
TEST_F(ControllerIntegrationTest, DomainDeletedWhileItsFinalizerIsAddedLeavesNothingBehind) {
  StartController();
  auto vanished = [&] {
    for (absl::string_view line : absl::StrSplit(registry_.Render(), '\n')) {
      double v = 0;
      if (absl::ConsumePrefix(&line, "nvidia_dra_compute_domain_vanished_total ") &&
          absl::SimpleAtod(line, &v)) {
        return v;
      }
    }
    return 0.0;
  };
  std::set<std::string> uids;
  // The race needs the DELETE and the finalizer patch to overlap: the 1000-domain churn hit it in
  // 44 of its 500 immediately-deleted domains, 8 of them after the daemon template was created.
  // Ten hits make it likely that at least one had objects to remove.
  for (int i = 0; i < 500 && vanished() < 10; ++i) {
    const std::string name = absl::StrCat("quick-", i);
    auto made = client_->Create(k8s::ComputeDomain::kResource, user_ns_.name(),
                                ComputeDomainManifest(user_ns_.name(), name, 1, name + "-ch"));
    ASSERT_TRUE(made.ok()) << made.status();
    uids.insert((*made)["metadata"]["uid"].get<std::string>());
    // A little later than at once, so that the controller's patch overlaps the DELETE.
    absl::SleepFor(absl::Milliseconds(i % 10));
    ASSERT_TRUE(client_->Delete(k8s::ComputeDomain::kResource, user_ns_.name(), name).ok());
  }
  if (vanished() == 0) {
    // The race did not happen (a faster or slower API server than the one it was seen on): there
    // is nothing to check, and a pass would claim what was not shown.
    GTEST_SKIP() << "no domain vanished with the finalizer in " << uids.size()
                 << " create/delete pairs; kubernetes#77988 not hit (fixed in this API server?)";
  }
  auto leftovers = [&] {
    std::string out;
    for (const std::string& uid : uids) {
      k8s::ListOptions sel{.label_selector = absl::StrCat(k8s::kComputeDomainLabel, "=", uid)};
      for (const auto* r : {&k8s::DaemonSet::kResource, &k8s::ResourceClaimTemplate::kResource,
                            &k8s::ComputeDomainClique::kResource}) {
        for (const std::string& ns : {driver_ns_.name(), user_ns_.name()}) {
          auto l = client_->List(*r, ns, sel);
          if (!l.ok()) return std::string(l.status().message());
          for (const auto& item : (*l)["items"]) {
            absl::StrAppend(&out, r->kind, " ", ns, "/", item["metadata"].value("name", ""), " ");
          }
        }
      }
    }
    auto cds = client_->List(k8s::ComputeDomain::kResource, user_ns_.name());
    if (!cds.ok()) return std::string(cds.status().message());
    for (const auto& item : (*cds)["items"]) {
      absl::StrAppend(&out, "ComputeDomain ", item["metadata"].value("name", ""), " ");
    }
    return out;
  };
  // Far below the periodic cleanup's 10 minutes: only the reaction to the deletion passes.
  EXPECT_NE(Eventually([&] { return leftovers().empty(); }, absl::Seconds(60)),
            absl::InfiniteDuration())
      << leftovers();
}

TEST_F(ControllerIntegrationTest, ObjectsAndNodeLabelsOfMissingDomainsAreCleanedUp) {
  const std::string drv = driver_ns_.name();
  const std::string ghost = "00000000-dead-4000-8000-" + RandomSuffix() + "000000";
  AllowCleanup(ghost);
  json rct = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaimTemplate"},
      {"metadata",
       {{"name", DaemonObjectName(ghost)},
        {"labels",
         {{std::string(k8s::kComputeDomainLabel), ghost},
          {std::string(k8s::kComputeDomainTargetLabel), "Daemon"}}},
        {"finalizers", {"resource.nvidia.com/computeDomain"}}}},
      {"spec",
       {{"spec",
         {{"devices",
           {{"requests",
             {{{"name", "daemon"},
               {"exactly", {{"deviceClassName", "compute-domain-daemon.nvidia.com"}}}}}}}}}}}}};
  ASSERT_TRUE(client_->Create(k8s::ResourceClaimTemplate::kResource, drv, rct).ok());
  FakeNode node(client_.get(), ghost);
  StartController();
  EXPECT_NE(Eventually([&] {
              return Gone(client_.get(), k8s::ResourceClaimTemplate::kResource, drv,
                          DaemonObjectName(ghost));
            }),
            absl::InfiniteDuration());
  EXPECT_NE(Eventually([&] { return node.Label().empty(); }), absl::InfiniteDuration());
}

TEST_F(ControllerIntegrationTest, ForeignClaimTemplateOfTheSameNameIsNotTakenOver) {
  const std::string ws = user_ns_.name();
  json foreign = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaimTemplate"},
      {"metadata", {{"name", "taken"}}},
      {"spec",
       {{"spec",
         {{"devices",
           {{"requests",
             {{{"name", "x"},
               {"exactly",
                {{"deviceClassName", "compute-domain-default-channel.nvidia.com"}}}}}}}}}}}}};
  ASSERT_TRUE(client_->Create(k8s::ResourceClaimTemplate::kResource, ws, foreign).ok());
  StartController();
  auto created = client_->Create(k8s::ComputeDomain::kResource, ws,
                                 ComputeDomainManifest(ws, "cd2", 0, "taken"));
  ASSERT_TRUE(created.ok());
  AllowCleanup((*created)["metadata"]["uid"]);
  // The domain gets its daemon objects but never a status (its reconcile keeps failing), and the
  // user's template is left as it was.
  absl::SleepFor(absl::Seconds(2));
  json rct = *client_->Get(k8s::ResourceClaimTemplate::kResource, ws, "taken");
  EXPECT_FALSE(rct["metadata"].contains("labels"));
  EXPECT_FALSE(GetCd("cd2").contains("status"));
  // The user is told why, once (not once per retry).
  auto events =
      client_->List(k8s::Event::kResource, ws, {.field_selector = "involvedObject.name=cd2"});
  ASSERT_TRUE(events.ok()) << events.status();
  // One per distinct problem, not one per retry (about ten retries in these two seconds); a
  // second controller in the cluster (an e2e's Helm install watches every namespace) may add its
  // own.
  ASSERT_GE((*events)["items"].size(), 1u) << events->dump();
  ASSERT_LE((*events)["items"].size(), 2u) << events->dump();
  const json& event = (*events)["items"][0];
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["reason"], "ReconcileFailed");
  EXPECT_THAT(event["message"].get<std::string>(),
              ::testing::HasSubstr("already exists and does not belong to this ComputeDomain"));
  // Deleting the domain does not delete the user's template.
  ASSERT_TRUE(client_->Delete(k8s::ComputeDomain::kResource, ws, "cd2").ok());
  ASSERT_NE(
      Eventually([&] { return Gone(client_.get(), k8s::ComputeDomain::kResource, ws, "cd2"); }),
      absl::InfiniteDuration());
  EXPECT_TRUE(Exists(client_.get(), k8s::ResourceClaimTemplate::kResource, ws, "taken"));
}

}  // namespace
}  // namespace dra::cdcontroller
