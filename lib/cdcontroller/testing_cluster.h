#pragma once

// Helpers of the controller's integration tests against the local cluster: a client, unique
// namespaces that are deleted afterwards, polling, and ComputeDomain / clique / pod manifests.

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/rest_config.h"
#include "nlohmann/json.hpp"
#include "test/support/cluster_env.h"
#include "test/support/namespaces.h"

namespace dra::cdcontroller::testing {

inline constexpr k8s::ResourceInfo kNamespaces{"", "v1", "Namespace", "namespaces", false};
inline constexpr k8s::ResourceInfo kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};

inline std::string RandomSuffix() {
  static std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat("%06x", rng() & 0xffffff);
}

inline std::unique_ptr<k8s::Client> AdminClient() {
  absl::StatusOr<k8s::RestConfig> rc = k8s::LoadKubeconfig(dra::testing::AdminKubeconfig());
  EXPECT_TRUE(rc.ok()) << rc.status();
  absl::StatusOr<std::unique_ptr<k8s::Client>> c =
      k8s::Client::Create(*rc, {.qps = 0, .burst = 1000});
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

// Polls `pred` every 20 ms until it holds or `timeout` passes; returns the time it took, or
// nullopt-like InfiniteDuration when it never held.
inline absl::Duration Eventually(const std::function<bool()>& pred,
                                 absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    if (pred()) return absl::Now() - start;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred() ? absl::Now() - start : absl::InfiniteDuration();
}

// A namespace for the test's lifetime (deleted without waiting).
class ScopedNamespace {
 public:
  ScopedNamespace(k8s::Client* client, const std::string& prefix)
      : client_(client), name_(prefix + "-" + RandomSuffix()) {
    absl::Status s =
        dra::testing::CreateNamespaceForPods(client_, {{"metadata", {{"name", name_}}}});
    EXPECT_TRUE(s.ok()) << s;
  }
  ~ScopedNamespace() { (void)client_->Delete(kNamespaces, "", name_); }
  const std::string& name() const { return name_; }

 private:
  k8s::Client* client_;
  std::string name_;
};

inline nlohmann::json ComputeDomainManifest(const std::string& ns, const std::string& name,
                                            int num_nodes, const std::string& rct,
                                            const std::string& mode = "Single") {
  return {{"apiVersion", "resource.nvidia.com/v1beta1"},
          {"kind", "ComputeDomain"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"numNodes", num_nodes},
            {"channel", {{"resourceClaimTemplate", {{"name", rct}}}, {"allocationMode", mode}}}}}};
}

// A pod labelled as the IMEX daemon of domain `uid` would label itself, bound to `node` (a name
// without a kubelet, so it stays Pending) and controlled by `owner` (a ConfigMap), so that the
// domain's DaemonSet does not adopt it.
inline nlohmann::json DaemonPodManifest(const std::string& ns, const std::string& name,
                                        const std::string& uid, const std::string& clique_id,
                                        const std::string& node, const nlohmann::json& owner) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels",
             {{std::string(k8s::kComputeDomainLabel), uid},
              {std::string(k8s::kComputeDomainCliqueLabel), clique_id}}},
            {"ownerReferences",
             {{{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"name", owner["metadata"]["name"]},
               {"uid", owner["metadata"]["uid"]},
               {"controller", true}}}}}},
          {"spec",
           {{"nodeName", node},
            {"containers", {{{"name", "c"}, {"image", "registry.invalid/none:0"}}}}}}};
}

// A Node object without a kubelet, labelled for a domain, so that the controller's label removal
// can be observed without touching the cluster's real nodes.
class FakeNode {
 public:
  FakeNode(k8s::Client* c, const std::string& cd_uid,
           const std::string& prefix = "h3-cdc-fake-node")
      : c_(c), name_(prefix + "-" + RandomSuffix()) {
    auto r = c_->Create(
        k8s::Node::kResource, "",
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata",
          {{"name", name_}, {"labels", {{std::string(k8s::kComputeDomainLabel), cd_uid}}}}}});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  ~FakeNode() { (void)c_->Delete(k8s::Node::kResource, "", name_); }
  std::string Label() {
    auto n = c_->Get(k8s::Node::kResource, "", name_);
    if (!n.ok()) return "<" + std::string(n.status().message()) + ">";
    return (*n)["metadata"]
        .value("labels", nlohmann::json::object())
        .value(std::string(k8s::kComputeDomainLabel), "");
  }

 private:
  k8s::Client* c_;
  std::string name_;
};

}  // namespace dra::cdcontroller::testing
