#include "lib/api/driver_gates.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::api {
namespace {

using S = FeatureStage;

// The public driver's IP mode and daemon-written ComputeDomain status do not exist here: the
// controller, the daemon and the kubelet plugin follow only ComputeDomainClique objects with
// DNS-named daemons, so these settings are refused rather than ignored.
constexpr absl::string_view kNoLegacyDomains =
    "ComputeDomains without ComputeDomainCliques and DNS-named IMEX daemons are not supported by "
    "the controller and kubelet plugin of this version";

// The one place that says which gates this version implements: `missing` is empty for a gate whose
// capability exists (the binary acting on it in the comment), else why it is not available. Helm
// passes one FEATURE_GATES value to every component, so availability is per release, not per
// binary: a gate that some binary of this version implements is accepted by all of them.
constexpr DriverGate kDriverGates[] = {
    // gpu-kubelet-plugin (prepare, unprepare) and webhook (validation).
    {gate::kTimeSlicingSettings, S::kAlpha, false, "0.2",
     "allow GPU sharing strategy TimeSlicing and its interval setting", ""},
    // gpu-kubelet-plugin (MPS control daemons) and webhook (validation).
    {gate::kMPSSupport, S::kAlpha, false, "0.2",
     "allow GPU sharing strategy MPS (an MPS control daemon per device group); works with "
     "DynamicMIG",
     ""},
    // compute-domain-daemon (nodes file, /etc/hosts), compute-domain-kubelet-plugin (driver
    // version).
    {gate::kIMEXDaemonsWithDNSNames, S::kBeta, true, "0.2",
     "compute domains: IMEX daemons address each other by DNS names", kNoLegacyDomains},
    // gpu-kubelet-plugin (gpu-vfio devices, the vfio prepare steps; docs/vfio.md).
    {gate::kPassthroughSupport, S::kAlpha, false, "0.3",
     "announce GPUs for VFIO passthrough (needs IOMMU and the host root mounted); works with "
     "DynamicMIG and NVMLDeviceHealthCheck",
     ""},
    // gpu-kubelet-plugin (partitionable devices, the migDevices prepare step; dynamic-mig.md).
    {gate::kDynamicMIG, S::kAlpha, false, "0.3",
     "create and delete MIG devices on demand at prepare and unprepare; works with MPSSupport, "
     "PassthroughSupport and NVMLDeviceHealthCheck",
     ""},
    // gpu-kubelet-plugin (device health).
    {gate::kNVMLDeviceHealthCheck, S::kAlpha, false, "0.3",
     "watch NVML events and taint unhealthy devices; works with DynamicMIG and "
     "PassthroughSupport",
     ""},
    // compute-domain-daemon, -controller and -kubelet-plugin.
    {gate::kComputeDomainCliques, S::kBeta, true, "0.3",
     "compute domains: track IMEX daemons in ComputeDomainClique objects", kNoLegacyDomains},
    // compute-domain-kubelet-plugin (clique ID discovery).
    {gate::kCrashOnNVLinkFabricErrors, S::kBeta, true, "0.3",
     "compute domains: crash the plugin on NVLink fabric errors", ""},
    // gpu-kubelet-plugin (the deviceMetadata prepare step; docs/device-metadata.md).
    {gate::kDeviceMetadata, S::kAlpha, false, "0.4",
     "publish device metadata files to workloads (KEP-5304)", ""},
    // gpu-kubelet-plugin (ResourceSlices).
    {gate::kDRAListTypeAttributes, S::kAlpha, false, "0.4",
     "publish resource.kubernetes.io/numaNode as a list attribute", ""},
    // gpu-kubelet-plugin (gpuModuleID/partitionN attributes, the fabricPartition prepare step;
    // docs/fabric-manager.md).
    {gate::kFabricManagerPartitioning, S::kAlpha, false, "0.5",
     "activate Fabric Manager partitions matching the prepared GPUs", ""},
    // compute-domain-controller and -kubelet-plugin (--imex-mode=hostManaged).
    {gate::kHostManagedIMEXDaemon, S::kAlpha, false, "0.5",
     "compute domains: use an IMEX daemon managed on the host", ""},
    // gpu-kubelet-plugin (--consumable-shares).
    {gate::kConsumableShares, S::kAlpha, false, "0.5",
     "allow --consumable-shares: devices allocatable to several claims", ""},
    // Registered by the Go driver through component-base logging, where they switch Go logging
    // features (ContextualLogging's default is overridden to true there). Our klog-format logger
    // has none of them: its lines always carry their key=value context.
    {gate::kContextualLogging, S::kBeta, true, "", "logging: contextual logging",
     "logging is always contextual (key=value pairs) here"},
    {gate::kLoggingAlphaOptions, S::kAlpha, false, "", "logging: alpha logging options",
     "there are no alpha logging options here"},
    {gate::kLoggingBetaOptions, S::kBeta, true, "", "logging: beta logging options",
     "there are no beta logging options here"},
};

}  // namespace

std::span<const DriverGate> DriverGates() { return kDriverGates; }

bool DriverGateImplemented(absl::string_view name) {
  for (const DriverGate& g : kDriverGates) {
    if (g.name == name) return g.missing.empty();
  }
  return false;
}

absl::Status RegisterDriverFeatureGates(FeatureGates& registry, absl::string_view binary) {
  for (const DriverGate& g : kDriverGates) {
    std::string description(g.description);
    if (!g.since.empty()) absl::StrAppend(&description, " (since ", g.since, ")");
    FeatureSpec spec{
        .stage = g.stage, .default_value = g.default_value, .description = std::move(description)};
    if (!g.missing.empty()) {
      spec.unavailable =
          absl::StrCat("not available in this version of ", binary, " (", g.missing, ")");
    }
    RETURN_IF_ERROR(registry.Register(g.name, std::move(spec)));
  }
  return AddDriverGateRules(registry);
}

absl::Status AddDriverGateRules(FeatureGates& registry) {
  RETURN_IF_ERROR(
      registry.AddDependency(gate::kComputeDomainCliques, gate::kIMEXDaemonsWithDNSNames));
  // The Go driver's exclusions among DynamicMIG, PassthroughSupport, NVMLDeviceHealthCheck and
  // MPSSupport are lifted: every pair works together here (docs/compatibility.md "Beyond the
  // public driver").
  RETURN_IF_ERROR(registry.AddDependency(gate::kDeviceMetadata, gate::kPassthroughSupport));
  return absl::OkStatus();
}

}  // namespace dra::api
