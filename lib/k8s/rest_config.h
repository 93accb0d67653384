#pragma once

// Where and how to reach the Kubernetes API server: loaded from a kubeconfig file or from the
// in-cluster service-account environment. Certificates and keys are kept as PEM text in memory;
// a bearer token may come from a file that is re-read when it changes (projected tokens rotate).

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dra::k8s {

struct RestConfig {
  std::string server;  // "https://127.0.0.1:6443", no trailing slash
  std::string ca_pem;  // empty: system trust store
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string bearer_token;
  std::string bearer_token_file;  // re-read on change; wins over bearer_token when set
  std::string source;             // where this came from, for error messages
};

// Loads `path` and resolves `context` (empty: the file's current-context). Errors name the file
// and what is wrong in one line, e.g. `kubeconfig /x: context "dev" not found`.
absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// Reads a file that a kubeconfig names (certificate-authority, client-certificate, client-key).
using KubeconfigFileReader = std::function<absl::StatusOr<std::string>(const std::string& path)>;

// LoadKubeconfig on text already read: `path` names it in errors and is the base of relative
// file references, which are read through `read_file` (the fuzzer passes one that touches no
// file). Never throws, whatever `text` holds.
absl::StatusOr<RestConfig> ParseKubeconfig(absl::string_view text, const std::string& path,
                                           const std::string& context,
                                           const KubeconfigFileReader& read_file);

// In-cluster configuration: KUBERNETES_SERVICE_HOST/PORT, the service-account token file and CA
// under `sa_dir` (default /var/run/secrets/kubernetes.io/serviceaccount).
absl::StatusOr<RestConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// The usual resolution order of Kubernetes components: an explicit kubeconfig path, else
// $KUBECONFIG, else in-cluster when KUBERNETES_SERVICE_HOST is set, else ~/.kube/config.
absl::StatusOr<RestConfig> ResolveRestConfig(const std::string& kubeconfig_flag);

}  // namespace dra::k8s
