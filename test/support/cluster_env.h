#pragma once

// Where integration tests find the local cluster started by hack/cluster/up.sh. Tests fail (never
// skip) when the cluster is not there: the README's test command always starts it first.

#include <cstdlib>
#include <string>

#include "test/support/build_paths.h"

namespace dra::testing {

inline std::string ClusterDir() {
  const char* d = std::getenv("DRA_CLUSTER_DIR");
  return d != nullptr && *d != '\0' ? d : "/tmp/dra-cluster";
}
inline std::string AdminKubeconfig() { return ClusterDir() + "/admin.kubeconfig"; }
inline std::string LimitedKubeconfig() { return ClusterDir() + "/limited.kubeconfig"; }
inline std::string ExpiredKubeconfig() { return ClusterDir() + "/expired.kubeconfig"; }
inline std::string TokenKubeconfig() { return ClusterDir() + "/token.kubeconfig"; }

// Restarts kube-apiserver alone (hack/cluster/restart-apiserver.sh: graceful stop, start, /readyz;
// etcd keeps every object) with its output in <cluster dir>/logs/<log_name>. Returns the script's
// exit status (0 on success); on failure the log says why.
inline int RestartApiServer(const std::string& log_name) {
  const std::string cmd = SourceDir() + "/hack/cluster/restart-apiserver.sh >" + ClusterDir() +
                          "/logs/" + log_name + " 2>&1";
  return std::system(cmd.c_str());
}

}  // namespace dra::testing
