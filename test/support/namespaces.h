#pragma once

// Namespaces for tests that create pods in them.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/k8s/client.h"
#include "nlohmann/json.hpp"

namespace dra::testing {

// Creates the Namespace `object` (a v1 Namespace with metadata.name) and its ServiceAccount
// "default". The API server refuses every pod in a namespace until "default" exists, and
// kube-controller-manager creates it only some time after the namespace (seconds on a busy
// machine), so a test that makes pods at once would fail now and then; made here, it is there
// before the first pod. The controller-manager's own creation (AlreadyExists) is as good.
inline absl::Status CreateNamespaceForPods(k8s::Client* client, nlohmann::json object) {
  static constexpr k8s::ResourceInfo kNamespaces{"", "v1", "Namespace", "namespaces", false};
  static constexpr k8s::ResourceInfo kServiceAccounts{"", "v1", "ServiceAccount", "serviceaccounts",
                                                      true};
  object["apiVersion"] = "v1";
  object["kind"] = "Namespace";
  const std::string ns = object["metadata"]["name"].get<std::string>();
  if (auto made = client->Create(kNamespaces, "", object); !made.ok()) {
    return absl::Status(made.status().code(),
                        absl::StrCat("create namespace ", ns, ": ", made.status().message()));
  }
  auto sa = client->Create(kServiceAccounts, ns,
                           {{"apiVersion", "v1"},
                            {"kind", "ServiceAccount"},
                            {"metadata", {{"name", "default"}, {"namespace", ns}}}});
  if (!sa.ok() && !absl::IsAlreadyExists(sa.status())) {
    return absl::Status(sa.status().code(), absl::StrCat("create serviceaccount ", ns,
                                                         "/default: ", sa.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace dra::testing
