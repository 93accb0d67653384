#include "lib/cddaemon/daemon.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/cddaemon/clique_registrar.h"
#include "lib/cddaemon/dns_updater.h"
#include "lib/cddaemon/imex_files.h"
#include "lib/cddaemon/imex_process.h"
#include "lib/cddaemon/pod_readiness.h"
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
  if (c.gates != nullptr && (!c.gates->Enabled(api::gate::kIMEXDaemonsWithDNSNames) ||
                             !c.gates->Enabled(api::gate::kComputeDomainCliques))) {
    return absl::UnimplementedError(
        "compute-domain-daemon implements only IMEXDaemonsWithDNSNames=true with "
        "ComputeDomainCliques=true");
  }
  ASSIGN_OR_RETURN(k8s::RestConfig rest, k8s::ResolveRestConfig(c.kubeconfig));
  ASSIGN_OR_RETURN(std::unique_ptr<k8s::Client> client, k8s::Client::Create(rest));
  RETURN_IF_ERROR(LabelOwnPod(*client, c));

  if (c.clique_id.empty()) {
    DRA_INFO("no cliqueID: skipping clique registration and IMEX daemon management");
    signals->WaitForShutdown();
    DRA_INFO("Exiting");
    return absl::OkStatus();
  }

  // Checked before registering: a node without the binaries (the daemon claim's CDI edits did
  // not mount them) must not take an index it can never serve.
  absl::StatusOr<std::string> imex_path = FindProgram(c.imex_binary);
  if (!imex_path.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run the IMEX daemon: ", imex_path.status().message()));
  }
  RETURN_IF_ERROR(WriteImexConfig(c.imexd_dir, c.pod_ip));
  RETURN_IF_ERROR(WriteStaticNodesFile(c.imexd_dir, c.max_nodes_per_imex_domain));

  ImexProcess imex(
      {.argv = {*imex_path, "-c", ConfigPath(c.imexd_dir)}, .stop_timeout = c.imex_stop_timeout});
  DnsUpdater dns(c.hosts_file, c.clique_id, c.max_nodes_per_imex_domain, &imex);

  CliqueRegistrarOptions ro{.namespace_name = c.pod_namespace,
                            .compute_domain_uid = c.compute_domain_uid,
                            .me = {.node_name = c.node_name,
                                   .pod_ip = c.pod_ip,
                                   .pod_name = c.pod_name,
                                   .pod_uid = c.pod_uid,
                                   .clique_id = c.clique_id,
                                   .max_nodes = c.max_nodes_per_imex_domain},
                            .resync = kInformerResync};
  CliqueRegistrar registrar(client.get(), ro,
                            [&dns](const std::vector<k8s::ComputeDomainDaemonInfo>& daemons) {
                              return dns.Update(daemons);  // failures are retried
                            });
  PodReadinessWatcher pod_watch(client.get(), c.pod_namespace, c.pod_name, kInformerResync,
                                [&registrar](bool ready) { registrar.SetReady(ready); });
  registrar.Start();
  pod_watch.Start();
  DRA_INFO("daemon running", "clique", k8s::CliqueObjectName(c.compute_domain_uid, c.clique_id),
           "namespace", c.pod_namespace, "node", c.node_name, "podIP", c.pod_ip);

  signals->WaitForShutdown();
  DRA_INFO("shutting down: removing own clique entry and stopping nvidia-imex");
  absl::Status removed = registrar.Stop(kRemoveEntryBudget);
  if (!removed.ok()) DRA_ERROR("could not remove own clique entry", "err", removed);
  pod_watch.Stop();
  imex.Stop();
  DRA_INFO("Exiting");
  return absl::OkStatus();
}

}  // namespace dra::cddaemon
