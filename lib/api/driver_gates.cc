#include "lib/api/driver_gates.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "lib/common/status.h"

namespace dra::api {
namespace {

using S = FeatureStage;

constexpr DriverGate kDriverGates[] = {
    {gate::kTimeSlicingSettings, S::kAlpha, false, "0.2",
     "allow GPU sharing strategy TimeSlicing and its interval setting"},
    {gate::kMPSSupport, S::kAlpha, false, "0.2",
     "allow GPU sharing strategy MPS (an MPS control daemon per device group)"},
    {gate::kIMEXDaemonsWithDNSNames, S::kBeta, true, "0.2",
     "compute domains: IMEX daemons address each other by DNS names"},
    {gate::kPassthroughSupport, S::kAlpha, false, "0.3",
     "announce GPUs for VFIO passthrough (needs IOMMU and the host root mounted)"},
    {gate::kDynamicMIG, S::kAlpha, false, "0.3",
     "create and delete MIG devices on demand at prepare and unprepare"},
    {gate::kNVMLDeviceHealthCheck, S::kAlpha, false, "0.3",
     "watch NVML events and taint unhealthy devices"},
    {gate::kComputeDomainCliques, S::kBeta, true, "0.3",
     "compute domains: track IMEX daemons in ComputeDomainClique objects"},
    {gate::kCrashOnNVLinkFabricErrors, S::kBeta, true, "0.3",
     "compute domains: crash the plugin on NVLink fabric errors"},
    {gate::kDeviceMetadata, S::kAlpha, false, "0.4",
     "publish device metadata files to workloads (KEP-5304)"},
    {gate::kDRAListTypeAttributes, S::kAlpha, false, "0.4",
     "publish resource.kubernetes.io/numaNode as a list attribute"},
    {gate::kFabricManagerPartitioning, S::kAlpha, false, "0.5",
     "activate Fabric Manager partitions matching the prepared GPUs"},
    {gate::kHostManagedIMEXDaemon, S::kAlpha, false, "0.5",
     "compute domains: use an IMEX daemon managed on the host"},
    {gate::kConsumableShares, S::kAlpha, false, "0.5",
     "allow --consumable-shares: devices allocatable to several claims"},
    // Registered by the Go driver through component-base logging. ContextualLogging's default is
    // overridden to true there.
    {gate::kContextualLogging, S::kBeta, true, "", "logging: contextual logging"},
    {gate::kLoggingAlphaOptions, S::kAlpha, false, "", "logging: alpha logging options"},
    {gate::kLoggingBetaOptions, S::kBeta, true, "", "logging: beta logging options"},
};

}  // namespace

std::span<const DriverGate> DriverGates() { return kDriverGates; }

absl::Status RegisterDriverFeatureGates(FeatureGates& registry) {
  for (const DriverGate& g : kDriverGates) {
    std::string description(g.description);
    if (!g.since.empty()) absl::StrAppend(&description, " (since ", g.since, ")");
    RETURN_IF_ERROR(registry.Register(g.name, {.stage = g.stage,
                                               .default_value = g.default_value,
                                               .description = std::move(description)}));
  }
  RETURN_IF_ERROR(
      registry.AddDependency(gate::kComputeDomainCliques, gate::kIMEXDaemonsWithDNSNames));
  RETURN_IF_ERROR(registry.AddMutualExclusion(gate::kDynamicMIG, gate::kPassthroughSupport));
  RETURN_IF_ERROR(registry.AddMutualExclusion(gate::kDynamicMIG, gate::kNVMLDeviceHealthCheck));
  RETURN_IF_ERROR(registry.AddMutualExclusion(gate::kDynamicMIG, gate::kMPSSupport));
  RETURN_IF_ERROR(
      registry.AddMutualExclusion(gate::kPassthroughSupport, gate::kNVMLDeviceHealthCheck));
  RETURN_IF_ERROR(registry.AddDependency(gate::kDeviceMetadata, gate::kPassthroughSupport));
  return absl::OkStatus();
}

}  // namespace dra::api
