// gpu-kubelet-plugin: the kubelet plugin of the gpu.nvidia.com DRA driver. Flags and wiring only;
// the work is in lib/gpuplugin (app/plugin_app.h).
// `gpu-kubelet-plugin export-go-checkpoint [flags]` is the way back to the public Go driver
// instead: run on a node whose plugin has stopped, it writes the node's checkpoint in the Go
// driver's format where that driver reads it (lib/gpuplugin/record/go_export.h,
// docs/compatibility.md).

#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "lib/api/driver_gates.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/go_format.h"
#include "lib/common/atomic_file.h"
#include "lib/common/feature_gates.h"
#include "lib/common/flags.h"
#include "lib/common/signals.h"
#include "lib/gpuplugin/app/plugin_app.h"
#include "lib/gpuplugin/app/plugin_metrics.h"
#include "lib/gpuplugin/prepare/claim_steps.h"
#include "lib/gpuplugin/record/go_export.h"
#include "lib/kubeletplugin/plugin_host.h"
#include "lib/metrics/metrics.h"

namespace {

// Prints the claims of a Go-format checkpoint after verifying its checksums: one line per claim,
// "<uid> <state> <namespace>/<name> devices=<n>" ("-" for a name the Go driver dropped).
int VerifyGoCheckpoint(const std::string& path) {
  absl::StatusOr<std::string> text = dra::ReadFile(path);
  if (!text.ok()) {
    std::fprintf(stderr, "export-go-checkpoint: %s\n",
                 std::string(text.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<dra::checkpoint::GoCheckpoint> cp = dra::checkpoint::DecodeGoCheckpoint(*text);
  if (!cp.ok()) {
    std::fprintf(stderr, "export-go-checkpoint: %s: %s\n", path.c_str(),
                 std::string(cp.status().message()).c_str());
    return 1;
  }
  std::printf("%s: the public driver's format, layout %s%s, checksums verified, %zu claims\n",
              path.c_str(), cp->layout.c_str(),
              nlohmann::json::parse(*text).contains("v3") ? " (and v3)" : "", cp->claims.size());
  for (const auto& [uid, claim] : cp->claims) {
    size_t devices = 0;
    if (claim.prepared_devices.is_array()) {
      for (const nlohmann::json& g : claim.prepared_devices) {
        if (g.is_object() && g.value("devices", nlohmann::json()).is_array()) {
          devices += g["devices"].size();
        }
      }
    }
    const std::string name =
        claim.name.empty() ? std::string("-") : absl::StrCat(claim.namespace_name, "/", claim.name);
    std::printf("%s %s %s devices=%zu\n", uid.c_str(),
                std::string(dra::checkpoint::ClaimStateName(claim.state)).c_str(), name.c_str(),
                devices);
  }
  return 0;
}

int RunExportGoCheckpoint(int argc, char** argv) {
  std::string plugins_dir = "/var/lib/kubelet/plugins";
  std::string output, verify;
  dra::Flags flags(
      "gpu-kubelet-plugin export-go-checkpoint",
      "The way back to the public Go driver: writes this node's prepared claims (our checkpoint, "
      "<kubelet-plugins-directory-path>/gpu.nvidia.com/checkpoint.json, read, never changed) as "
      "the public driver's checkpoint, with valid checksums, so that the public driver installed "
      "next keeps the running pods and unprepares them later. By default the file is written "
      "over our checkpoint, where the public driver reads it, after copying ours to "
      "checkpoint.json.cpp-driver-<seconds>; that needs this node's plugin stopped (helm "
      "uninstall with kubeletPlugin.removeFilesOnUninstall=false), since a running plugin would "
      "adopt the file back, and is refused while one serves. The claims' CDI specs stay where "
      "they are. Refused, with nothing written: a claim whose prepare is in progress or failed "
      "part-way, or one with a DynamicMIG device. docs/compatibility.md, 'Going back to the "
      "public driver'.");
  flags.AddString("kubelet-plugins-directory-path", "KUBELET_PLUGINS_DIRECTORY_PATH", &plugins_dir,
                  "Parent of the plugin data directory <this>/gpu.nvidia.com, whose "
                  "checkpoint.json is read.");
  flags.AddString("output", "GO_CHECKPOINT_OUTPUT", &output,
                  "Where to write the public driver's checkpoint. Empty: over our checkpoint.json "
                  "(where the public driver reads it; only while no plugin serves there). "
                  "Another path: written there, whatever runs, for a look before the switch.");
  flags.AddString("verify", "GO_CHECKPOINT_VERIFY", &verify,
                  "Write nothing: read this file as the public driver's checkpoint, verify its "
                  "checksums by the format's rules and list its claims (uid, state, "
                  "namespace/name, devices). Exit status 1 when it does not verify.");
  flags.SetVersion(DRA_VERSION);
  flags.ParseOrExit(argc, argv);
  if (!verify.empty()) return VerifyGoCheckpoint(verify);

  const std::string dir = absl::StrCat(plugins_dir, "/gpu.nvidia.com");
  const std::string ours = absl::StrCat(dir, "/", dra::checkpoint::kCheckpointFileName);
  if (output.empty()) {
    output = ours;
    if (absl::Status s = dra::gpu::CheckNoPluginServing(dir); !s.ok()) {
      std::fprintf(stderr, "export-go-checkpoint: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  absl::StatusOr<dra::gpu::GoExportResult> r = dra::gpu::ExportGoCheckpoint(ours, output);
  if (!r.ok()) {
    std::fprintf(stderr, "export-go-checkpoint: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  std::printf("wrote %zu prepared claims to %s in the public driver's format\n", r->claims,
              output.c_str());
  if (!r->kept_ours.empty()) {
    std::printf("our checkpoint was copied to %s\n", r->kept_ours.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "export-go-checkpoint") {
    return RunExportGoCheckpoint(argc - 1, argv + 1);
  }
  // At most two glibc malloc arenas instead of eight per core: the kubelet's concurrent calls
  // (one gRPC thread each) would otherwise each grow an arena of their own, about 0.2-4 MiB apiece
  // that is rarely given back (docs/performance.md "Memory"). An operator's MALLOC_ARENA_MAX or
  // GLIBC_TUNABLES wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr && std::getenv("GLIBC_TUNABLES") == nullptr) {
    mallopt(M_ARENA_MAX, 2);
  }
  dra::gpu::PluginConfig c;
  return dra::kubeletplugin::RunPluginMain(
      argc, argv, &c,
      {.program = "gpu-kubelet-plugin",
       .description =
           "gpu-kubelet-plugin implements a DRA driver plugin for NVIDIA GPUs. "
           "`gpu-kubelet-plugin export-go-checkpoint --help`: the way back to the public "
           "driver.",
       .version = DRA_VERSION,
       .help = {.namespace_name = "Namespace for MPS control-daemon Deployments.",
                .cdi_root =
                    "Directory for the generated per-claim CDI specs (created 0750 if missing).",
                .container_driver_root =
                    "Where the host driver root is mounted in this container; NVML "
                    "and the driver files are looked up here.",
                .proc_root = "Where /proc is found (MIG capability files, /proc/devices).",
                .alt_proc_devices =
                    "A file read instead of <proc-root>/devices for the character device "
                    "majors, for nodes whose kernel has no NVIDIA entries there (simulated "
                    "GPUs; the chart's altProcDevices). Empty: <proc-root>/devices.",
                .kubelet_plugins_dir = "Parent of the plugin data directory <this>/gpu.nvidia.com "
                                       "(sockets, checkpoint, locks).",
                .cleanup_interval = "How often prepared claims whose ResourceClaim is gone are "
                                    "unprepared."},
       .register_gates =
           [](dra::FeatureGates& gates) {
             return dra::api::RegisterDriverFeatureGates(gates, "gpu-kubelet-plugin");
           },
       .add_flags =
           [c = &c](dra::Flags& flags) {
             flags.AddString(
                 "image-name", "IMAGE_NAME", &c->image_name,
                 "Image of the MPS control-daemon pods (the plugin's own image in the Helm "
                 "chart). Required when the feature gate MPSSupport is enabled; unused without "
                 "it.");
             flags.AddString(
                 "image-pull-secrets", "IMAGE_PULL_SECRETS", &c->image_pull_secrets,
                 "Comma-separated image pull secret names for the MPS control-daemon pods.");
             flags.AddString(
                 "image-pull-policy", "IMAGE_PULL_POLICY", &c->image_pull_policy,
                 "Image pull policy of the MPS control-daemon pods (Always, IfNotPresent, "
                 "Never); empty: the Kubernetes default.");
             flags.AddString(
                 "service-account-name", "SERVICE_ACCOUNT_NAME", &c->service_account_name,
                 "Service account of the MPS control-daemon pods; empty: the namespace's "
                 "default.");
             flags.AddString("sys-root", "SYS_ROOT", &c->sys_root,
                             "Where /sys is found (PCI topology).");
             flags.AddString(
                 "host-root", "HOST_ROOT", &c->host_root,
                 "Where the host's / is mounted in this container. Needed by the feature gate "
                 "PassthroughSupport (VFIO): the host's PCI devices, IOMMU groups and "
                 "modules.alias are read there, modprobe and fuser run chrooted into it; the "
                 "plugin refuses to start with the gate on when it does not exist. With the gate "
                 "FabricManagerPartitioning, the NVLink fabric is looked for there "
                 "(proc/driver/nvidia-nvswitch/devices, sys/class/infiniband/*/device/vpd).");
             flags.AddString(
                 "consumable-shares", "CONSUMABLE_SHARES", &c->consumable_shares,
                 "Let several claims share a full GPU or MIG device (Kubernetes "
                 "DRAConsumableCapacity): 'disabled' (one claim per device), 'memory' (claims "
                 "consume device memory, by default all of it), 'unlimited' (memory, by default "
                 "none of it), or a positive integer N (memory as with 'unlimited' plus N "
                 "'shares', one per claim by default). Anything but 'disabled' needs the feature "
                 "gate ConsumableShares. Claims sharing a device must configure it alike; MPS is "
                 "not allowed then.");
             flags.AddBool(
                 "device-status", "DEVICE_STATUS", &c->device_status,
                 "Write each prepared claim's status.devices entries (the device's UUID, product "
                 "name, MIG parent and profile, a Ready condition) and remove them at unprepare. "
                 "Best effort: a failed write never fails a prepare. Off: none are written; "
                 "entries written earlier are still removed at unprepare.");
             flags.AddBool(
                 "prepare-trace", "PREPARE_TRACE", &c->prepare_trace,
                 "Log one line per prepare and unprepare call with the time spent in each stage "
                 "(claim fetch, config resolution, checkpoint read and write, CDI spec write, "
                 "device status, response), in microseconds. Also on at -v=5 and above.");
             flags.AddBool(
                 "claim-informer", "CLAIM_INFORMER", &c->claim_informer,
                 "Answer the claim reads of a prepare from a cache of the ResourceClaims allocated "
                 "to this node, kept by a watch; a claim missing from it, or whose cached copy "
                 "has another UID or no allocation, is read with a GET. Off (the default): one "
                 "GET per claim. The watch cannot be narrowed to this node: the API server sends "
                 "every claim event of the cluster to every node that has it on.");
             flags.AddDuration(
                 "nvidia-smi-timeout", "NVIDIA_SMI_TIMEOUT", &c->nvidia_smi_timeout,
                 "Time limit of one nvidia-smi run (setting GPU time-slices); it is killed "
                 "after that and the prepare fails (the kubelet retries).");
             flags.AddString(
                 "additional-xids-to-ignore", "ADDITIONAL_XIDS_TO_IGNORE",
                 &c->additional_xids_to_ignore,
                 "With the feature gate NVMLDeviceHealthCheck: comma-separated XIDs that only "
                 "say an application failed, in addition to 13,31,43,45,68,109. Such an XID "
                 "taints the device with effect None (still schedulable, still healthy); any "
                 "other XID taints it NoSchedule and reports it unhealthy to the kubelet.");
             flags.AddDuration(
                 "health-recovery-quiet-period", "HEALTH_RECOVERY_QUIET_PERIOD",
                 &c->health_recovery_quiet_period,
                 "With the feature gate NVMLDeviceHealthCheck: a device tainted NoSchedule for "
                 "a critical XID or a lost GPU that sees no such event for this long is "
                 "re-checked through NVML and, if its queries succeed, untainted and reported "
                 "healthy again (a Node event DeviceHealthRecovered records it). 0 disables "
                 "recovery: taints stay until the plugin restarts, as in the Go driver.");
           },
       .run = [&c](dra::SignalHandler* signals) { return dra::gpu::RunPlugin(c, signals); },
       .metrics_markdown =
           [] {
             dra::metrics::Registry registry;
             dra::gpu::DescribeGpuPluginMetrics(&registry);
             return dra::metrics::DescribeMarkdown(registry);
           },
       .steps_markdown = [] { return dra::gpu::GpuStepTableMarkdown(); }});
}
