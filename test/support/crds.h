#pragma once

// Installs the chart's CustomResourceDefinitions (deployments/helm/dra-driver-nvidia-gpu/crds/) in
// the local cluster, for the integration tests that create ComputeDomains and cliques. Every test
// run starts from an empty control plane, so a test must not rely on an earlier e2e run's Helm
// install having left them behind.
//
// Usage, in the fixture of every test that needs them:
//   static void SetUpTestSuite() {
//     absl::Status crds = dra::testing::InstallChartCrds();
//     ASSERT_TRUE(crds.ok()) << crds;
//   }

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/common/atomic_file.h"
#include "lib/common/status.h"
#include "lib/k8s/client.h"
#include "lib/k8s/rest_config.h"
#include "lib/k8s/yaml_json.h"
#include "nlohmann/json.hpp"
#include "test/support/cluster_env.h"

namespace dra::testing {

inline std::string ChartCrdDir() {
  return SourceDir() + "/deployments/helm/dra-driver-nvidia-gpu/crds";
}

namespace crds_internal {

inline constexpr k8s::ResourceInfo kCrds{"apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                                         "customresourcedefinitions", false};

inline nlohmann::json Conditions(const nlohmann::json& crd) {
  return crd.value("status", nlohmann::json::object()).value("conditions", nlohmann::json::array());
}

// The CRD's condition `type` is True.
inline bool ConditionTrue(const nlohmann::json& crd, const std::string& type) {
  for (const nlohmann::json& c : Conditions(crd)) {
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

}  // namespace crds_internal

// Applies every CRD of the chart (server-side apply, forced, as field manager "helm-driver" like
// hack/cluster/helm-driver.sh, so a CRD already there is updated to the chart's, never an error)
// and returns OK once each is Established and its resource answers a list in every version it
// serves. Fails after `timeout` naming the CRD and what it lacked (the condition, or the list
// error). Never deletes anything: later tests and the e2e's `helm install` keep using them.
inline absl::Status InstallChartCrds(absl::Duration timeout = absl::Seconds(60)) {
  const absl::Time deadline = absl::Now() + timeout;
  ASSIGN_OR_RETURN(k8s::RestConfig config, k8s::LoadKubeconfig(AdminKubeconfig()));
  ASSIGN_OR_RETURN(std::unique_ptr<k8s::Client> client,
                   k8s::Client::Create(config, {.field_manager = "helm-driver"}));

  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(ChartCrdDir(), ec)) {
    const std::string ext = e.path().extension();
    if (ext == ".yaml" || ext == ".yml") files.push_back(e.path());
  }
  if (ec || files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no CRD manifests in ", ChartCrdDir(), ": ", ec ? ec.message() : "no *.yaml"));
  }
  std::sort(files.begin(), files.end());

  std::vector<nlohmann::json> applied;
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(file));
    absl::StatusOr<std::vector<nlohmann::json>> docs = k8s::YamlDocumentsToJson(text);
    if (!docs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", docs.status().message()));
    }
    for (nlohmann::json& crd : *docs) {
      if (!crd.is_object()) continue;
      absl::StatusOr<nlohmann::json> out = client->Apply(crds_internal::kCrds, "", crd);
      if (!out.ok()) {
        return absl::Status(out.status().code(),
                            absl::StrCat("apply CRD from ", file, ": ", out.status().message()));
      }
      applied.push_back(std::move(crd));
    }
  }

  // Established: the API server serves the kind. The list proves the handler answers (a CRD just
  // established can still answer 404 for a moment on a busy server).
  for (const nlohmann::json& crd : applied) {
    const std::string name = crd["metadata"]["name"];
    const std::string group = crd["spec"]["group"];
    const std::string plural = crd["spec"]["names"]["plural"];
    const std::string kind = crd["spec"]["names"]["kind"];
    const bool namespaced = crd["spec"].value("scope", "") == "Namespaced";
    std::vector<std::string> versions;
    for (const nlohmann::json& v : crd["spec"]["versions"]) {
      if (v.value("served", false)) versions.push_back(v["name"]);
    }
    std::string missing;
    while (true) {
      absl::StatusOr<nlohmann::json> got = client->Get(crds_internal::kCrds, "", name);
      if (!got.ok()) {
        missing = absl::StrCat("get failed: ", got.status().message());
      } else if (!crds_internal::ConditionTrue(*got, "Established")) {
        missing = absl::StrCat("condition Established is not True (conditions: ",
                               crds_internal::Conditions(*got).dump(), ")");
      } else {
        missing.clear();
        for (const std::string& version : versions) {
          const k8s::ResourceInfo r{group, version, kind, plural, namespaced};
          absl::Status listed = client->List(r, "", {.limit = 1}).status();
          if (!listed.ok()) {
            missing = absl::StrCat("list ", group, "/", version, " ", plural,
                                   " failed: ", listed.message());
            break;
          }
        }
        if (missing.empty()) break;
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("CRD ", name, " (", ChartCrdDir(), ") not served within ",
                         absl::FormatDuration(timeout), ": ", missing));
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  return absl::OkStatus();
}

}  // namespace dra::testing
