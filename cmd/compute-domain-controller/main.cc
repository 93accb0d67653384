// compute-domain-controller: the cluster-wide controller of the compute-domain.nvidia.com DRA
// driver. Flags and wiring only; the work is in lib/cdcontroller.
// `compute-domain-controller cleanup [flags]` is the Helm chart's pre-delete hook instead: it
// releases every ComputeDomain (removes the driver's objects, node labels and finalizer, leaves
// the domain), or with --delete-compute-domains deletes them and waits until the running
// controller has finalized them (lib/cdcontroller/uninstall.h).

#include <cstdio>
#include <string>
#include <string_view>

#include "lib/api/driver_gates.h"
#include "lib/cdcontroller/app.h"
#include "lib/cdcontroller/config.h"
#include "lib/cdcontroller/uninstall.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/log.h"
#include "lib/common/signals.h"
#include "lib/common/stack_dump.h"

namespace {

int RunCleanupCommand(int argc, char** argv, dra::SignalHandler* signals) {
  dra::cdcontroller::CleanupProcessOptions options;
  dra::Flags flags("compute-domain-controller cleanup",
                   "Releases every ComputeDomain of the cluster: stops the controller, removes "
                   "each domain's IMEX DaemonSet, ResourceClaimTemplates, cliques, node labels and "
                   "the driver's finalizer, and leaves the ComputeDomain objects. With "
                   "--delete-compute-domains it deletes every ComputeDomain instead and waits "
                   "until the running controller has finalized them. Then waits for the IMEX "
                   "daemon pods to go. Fails, naming the domains left, after --timeout. The Helm "
                   "chart runs it as its pre-delete hook, so that `helm uninstall` leaves no "
                   "ComputeDomain with a finalizer nobody removes.");
  dra::cdcontroller::AddCleanupFlags(flags, &options);
  flags.SetVersion(DRA_VERSION);
  flags.ParseOrExit(argc, argv);
  flags.LogStartupConfig(/*gates=*/nullptr);
  absl::Status s = dra::cdcontroller::RunCleanup(options, signals);
  if (!s.ok()) {
    DRA_ERROR("cleanup failed", "err", s);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dra::InitializeStackDumpSymbolizer(argv[0]);
  // Signals are blocked before any thread starts so that only the handler thread receives them.
  auto signals = dra::SignalHandler::Start();
  if (!signals.ok()) {
    std::fprintf(stderr, "compute-domain-controller: %s\n",
                 std::string(signals.status().message()).c_str());
    return 1;
  }
  if (argc >= 2 && std::string_view(argv[1]) == "cleanup") {
    return RunCleanupCommand(argc - 1, argv + 1, signals->get());
  }
  dra::FeatureGates gates;
  if (absl::Status s = dra::api::RegisterDriverFeatureGates(gates, "compute-domain-controller");
      !s.ok()) {
    std::fprintf(stderr, "compute-domain-controller: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  dra::cdcontroller::ProcessOptions options;
  dra::Flags flags("compute-domain-controller",
                   "compute-domain-controller reconciles ComputeDomains: it creates the IMEX "
                   "daemons' DaemonSet and ResourceClaimTemplate and the workload "
                   "ResourceClaimTemplate of each domain, reports the domain's status from its "
                   "cliques, and cleans up through the domain's finalizer. `"
                   "compute-domain-controller cleanup --help`: the uninstall step.");
  dra::cdcontroller::AddControllerFlags(flags, &options, &gates);
  flags.SetVersion(DRA_VERSION);
  flags.SetMetricsReference(dra::cdcontroller::MetricsMarkdown);
  flags.ParseOrExit(argc, argv);
  flags.LogStartupConfig(&gates);
  // SIGUSR2 dumps every thread's stack, as the Go controller does for its goroutines.
  dra::InstallStackDumpHandler();
  (*signals)->OnUsr2(
      [] { (void)dra::DumpAllThreadStacks("/tmp/compute-domain-controller-stacks.dump"); });

  absl::Status s = dra::cdcontroller::RunController(options, gates, signals->get());
  if (!s.ok()) {
    DRA_ERROR("compute-domain-controller failed", "err", s);
    return 1;
  }
  return 0;
}
