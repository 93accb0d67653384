// compute-domain-kubelet-plugin: the kubelet plugin of the compute-domain.nvidia.com DRA driver
// (IMEX channels and IMEX daemons of ComputeDomains). Flags and wiring only; the work is in
// lib/cdplugin (plugin_app.h).

#include "lib/api/driver_gates.h"
#include "lib/cdplugin/claim_steps.h"
#include "lib/cdplugin/plugin_app.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/signals.h"
#include "lib/kubeletplugin/plugin_host.h"
#include "lib/metrics/metrics.h"

namespace {
constexpr char kName[] = "compute-domain-kubelet-plugin";
}  // namespace

int main(int argc, char** argv) {
  dra::cdplugin::PluginConfig c;
  return dra::kubeletplugin::RunPluginMain(
      argc, argv, &c,
      {.program = kName,
       .description = "compute-domain-kubelet-plugin implements the DRA kubelet plugin of NVIDIA "
                      "ComputeDomains (IMEX channels and IMEX daemons).",
       .version = DRA_VERSION,
       .help =
           {.namespace_name = "The driver's namespace, where the ComputeDomainClique objects live.",
            .cdi_root = "Directory for the generated CDI specs (created 0750 if missing).",
            .container_driver_root =
                "Where the host driver root is mounted in this container; NVML, "
                "nvidia-imex and the driver files are looked up here.",
            .proc_root = "Where /proc is found (/proc/devices for the IMEX channel major, the "
                         "fabric-imex-mgmt capability).",
            .alt_proc_devices = "A file read instead of <proc-root>/devices for the IMEX channel "
                                "device major, for nodes whose kernel has no NVIDIA entries there "
                                "(simulated GPUs; the chart's altProcDevices). Empty: "
                                "<proc-root>/devices.",
            .kubelet_plugins_dir =
                "Parent of the plugin data directory "
                "<this>/compute-domain.nvidia.com (socket, checkpoint, per-domain "
                "IMEX config directories).",
            .cleanup_interval = "How often half-prepared claims whose ResourceClaim is gone are "
                                "unprepared, expired aborted records dropped and directories of "
                                "deleted ComputeDomains removed."},
       .register_gates =
           [](dra::FeatureGates& gates) {
             return dra::api::RegisterDriverFeatureGates(gates, kName);
           },
       .add_flags =
           [c = &c](dra::Flags& flags) {
             flags.AddBool(
                 "gpu-clique-label-enabled", "GPU_CLIQUE_LABEL_ENABLED",
                 &c->gpu_clique_label_enabled,
                 "Label the node nvidia.com/gpu.clique=<cliqueID> while the plugin runs (nodes "
                 "with a clique ID only).");
             flags.AddBool(
                 "binding-conditions", "BINDING_CONDITIONS", &c->binding_conditions,
                 "Publish the IMEX channel device with device binding conditions (KEP-5007), so "
                 "that the scheduler binds a workload pod only once the ComputeDomain controller "
                 "reported the node's IMEX daemon Ready (needs the controller's "
                 "--binding-conditions). Without them, or on a cluster without "
                 "DRADeviceBindingConditions, the prepare waits for the daemon. Ignored with "
                 "--imex-mode=hostManaged.");
             flags.AddString(
                 "imex-mode", "IMEX_MODE", &c->imex_mode,
                 "Who runs the IMEX daemons: driverManaged (per-ComputeDomain daemon pods) or "
                 "hostManaged (the hosts run nvidia-imex; needs the feature gate "
                 "HostManagedIMEXDaemon).");
             flags.AddString("imex-isolation", "IMEX_ISOLATION", &c->imex_isolation,
                             "IMEX isolation: domain (channel is not supported yet).");
             flags.AddString("imex-host-socket-path", "IMEX_HOST_SOCKET_PATH",
                             &c->imex_host_socket_path,
                             "Host path of a host-managed IMEX daemon's command socket "
                             "(IMEX_CMD_UNIX_DOMAIN_PATH), queried under the dev root with "
                             "nvidia-imex-ctl -q --u=<socket> (imex-mode hostManaged only).");
           },
       .run = [&c](dra::SignalHandler* signals) { return dra::cdplugin::RunPlugin(c, signals); },
       // The host's families are all of this plugin's: lib/cdplugin registers none of its own.
       .metrics_markdown =
           [] {
             dra::metrics::Registry registry;
             dra::kubeletplugin::PluginHost::DescribeMetrics(&registry);
             return dra::metrics::DescribeMarkdown(registry);
           },
       .steps_markdown = [] { return dra::cdplugin::CdStepTableMarkdown(); }});
}
