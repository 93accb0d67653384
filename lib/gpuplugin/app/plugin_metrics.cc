#include "lib/gpuplugin/app/plugin_metrics.h"

#include "lib/gpuplugin/status/device_status.h"
#include "lib/kubeletplugin/plugin_host.h"

namespace dra::gpu {

GpuPluginMetrics AddGpuPluginMetrics(metrics::Registry* registry) {
  GpuPluginMetrics m;
  m.degraded =
      registry->AddGauge("nvidia_dra_plugin_degraded",
                         "1 when the plugin runs without a usable NVML (no devices).", {"reason"});
  m.status_writes = AddDeviceStatusWritesMetric(registry);
  m.status_queue_depth =
      registry->AddGauge("nvidia_dra_device_status_queue_depth",
                         "Claims whose status.devices write or removal waits for (or is at) the "
                         "API server.",
                         {});
  m.health_recoveries = registry->AddCounter(
      "nvidia_dra_device_health_recoveries_total",
      "Devices whose XID or GPU-lost taint was removed after the health recovery quiet period.",
      {"device"});
  return m;
}

metrics::Family<metrics::Counter>* AddClaimCacheLookupsMetric(metrics::Registry* registry) {
  return registry->AddCounter(
      "nvidia_dra_claim_cache_lookups_total",
      "Prepare's claim reads by how the claim cache answered: hit (from memory), miss (not "
      "cached) or stale (another UID or no allocation); a miss or stale one is a GET.",
      {"result"});
}

void DescribeGpuPluginMetrics(metrics::Registry* registry) {
  kubeletplugin::PluginHost::DescribeMetrics(registry);
  AddGpuPluginMetrics(registry);
  AddClaimCacheLookupsMetric(registry);
}

}  // namespace dra::gpu
