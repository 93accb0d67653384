#include "lib/cddaemon/daemon.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/cddaemon/clique_follower.h"
#include "lib/cddaemon/dns_updater.h"
#include "lib/cddaemon/imex_files.h"
#include "lib/cddaemon/imex_process.h"
#include "lib/common/log.h"
#include "lib/common/status.h"
#include "lib/k8s/client.h"
#include "lib/k8s/objects_compute_domain.h"
#include "lib/k8s/objects_core.h"
#include "lib/k8s/rest_config.h"

namespace dra::cddaemon {
namespace {

constexpr absl::Duration kInformerResync = absl::Minutes(4);
constexpr absl::Duration kRemoveEntryBudget = absl::Seconds(10);

absl::Status CheckIdentity(const DaemonConfig& c) {
  if (c.compute_domain_uid.empty()) {
    return absl::FailedPreconditionError(
        "CDI container edits did not apply -- is CDI enabled in your container runtime? "
        "(COMPUTE_DOMAIN_UUID is empty)");
  }
  std::string missing;
  auto need = [&](const std::string& v, absl::string_view what) {
    if (v.empty()) absl::StrAppend(&missing, missing.empty() ? "" : ", ", what);
  };
  need(c.node_name, "--node-name (NODE_NAME)");
  need(c.pod_name, "--pod-name (POD_NAME)");
  need(c.pod_namespace, "--pod-namespace (POD_NAMESPACE)");
  if (!c.clique_id.empty()) {
    need(c.pod_ip, "--pod-ip (POD_IP)");
    need(c.pod_uid, "--pod-uid (POD_UID)");
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("required but empty: ", missing));
  }
  if (!c.clique_id.empty() && c.max_nodes_per_imex_domain < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-nodes-per-imex-domain (MAX_NODES_PER_IMEX_DOMAIN) is ",
                     c.max_nodes_per_imex_domain, "; it must be at least 1"));
  }
  return absl::OkStatus();
}

absl::Status LabelOwnPod(k8s::Client& client, const DaemonConfig& c) {
  nlohmann::json patch = {
      {"metadata", {{"labels", {{std::string(k8s::kComputeDomainCliqueLabel), c.clique_id}}}}}};
  absl::StatusOr<nlohmann::json> out =
      client.MergePatch(k8s::Pod::kResource, c.pod_namespace, c.pod_name, patch);
  if (!out.ok()) {
    return absl::Status(out.status().code(),
                        absl::StrCat("label own pod ", c.pod_namespace, "/", c.pod_name, ": ",
                                     out.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDaemon(const DaemonConfig& c, SignalHandler* signals) {
  RETURN_IF_ERROR(CheckIdentity(c));
  // DNS names and cliques are the only mode: the gate registry refuses
  // IMEXDaemonsWithDNSNames=false and ComputeDomainCliques=false (lib/api/driver_gates.cc).
  ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::ResolveRestConfig(c.kubeconfig));
  ASSIGN_OR_RETURN(std::unique_ptr<k8s::Client> client, k8s::Client::Create(rest));
  // Checked before the pod is labelled: the label makes the controller list this node in its
  // clique, and a node without the binaries (the daemon claim's CDI edits did not mount them)
  // must not take an index it can never serve.
  absl::StatusOr<std::string> imex_path = std::string();
  if (!c.clique_id.empty()) {
    imex_path = FindProgram(c.imex_binary);
    if (!imex_path.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot run the IMEX daemon: ", imex_path.status().message()));
    }
  }
  RETURN_IF_ERROR(LabelOwnPod(*client, c));

  if (c.clique_id.empty()) {
    DRA_INFO("no cliqueID: skipping clique registration and IMEX daemon management");
    signals->WaitForShutdown();
    DRA_INFO("Exiting");
    return absl::OkStatus();
  }

  RETURN_IF_ERROR(WriteImexConfig(c.imexd_dir, c.pod_ip));
  RETURN_IF_ERROR(WriteStaticNodesFile(c.imexd_dir, c.max_nodes_per_imex_domain));

  ImexProcess imex(
      {.argv = {*imex_path, "-c", ConfigPath(c.imexd_dir)}, .stop_timeout = c.imex_stop_timeout});
  DnsUpdater dns(c.hosts_file, c.clique_id, c.max_nodes_per_imex_domain, &imex);
  // The controller writes the clique from the pod label set above (and reads the pod's Ready
  // condition itself); the daemon only reads it.
  CliqueFollower follower(client.get(),
                          CliqueFollowerOptions{.namespace_name = c.pod_namespace,
                                                .compute_domain_uid = c.compute_domain_uid,
                                                .clique_id = c.clique_id,
                                                .node_name = c.node_name,
                                                .resync = kInformerResync},
                          [&dns](const std::vector<k8s::ComputeDomainDaemonInfo>& daemons) {
                            return dns.Update(daemons);  // failures are retried
                          });
  const std::string where = absl::StrCat("ComputeDomainClique ", c.pod_namespace, "/",
                                         k8s::CliqueObjectName(c.compute_domain_uid, c.clique_id));
  follower.Start();
  DRA_INFO("daemon running", "registration", where, "node", c.node_name, "podIP", c.pod_ip,
           "dnsNames", true);

  signals->WaitForShutdown();
  DRA_INFO("shutting down: stopping nvidia-imex", "registration", where);
  absl::Status removed = follower.Stop(kRemoveEntryBudget);
  if (!removed.ok()) DRA_ERROR("could not remove own entry", "err", removed);
  imex.Stop();
  DRA_INFO("Exiting");
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
