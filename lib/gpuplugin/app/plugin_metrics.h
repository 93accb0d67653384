#pragma once

// The gpu-kubelet-plugin's own metric families, registered in one place so that the running
// plugin and the generated reference (`--help-metrics-markdown`, docs/reference.md "Metrics")
// cannot differ. The plugin host's families (call metrics, checkpoint corruptions, the HTTP
// endpoint's connections) are kubeletplugin::PluginHost::DescribeMetrics's.

#include "lib/metrics/metrics.h"

namespace dra::gpu {

struct GpuPluginMetrics {
  metrics::Family<metrics::Gauge>* degraded = nullptr;             // {reason}
  metrics::Family<metrics::Counter>* status_writes = nullptr;      // {operation, result}
  metrics::Family<metrics::Gauge>* status_queue_depth = nullptr;   // no labels
  metrics::Family<metrics::Counter>* health_recoveries = nullptr;  // {device}
};

// The families every plugin registers once it is connected to the API server.
GpuPluginMetrics AddGpuPluginMetrics(metrics::Registry* registry);

// With --claim-informer only: prepare's claim reads by how the cache answered {result}.
metrics::Family<metrics::Counter>* AddClaimCacheLookupsMetric(metrics::Registry* registry);

// Every family a serving gpu-kubelet-plugin may register: the host's, AddGpuPluginMetrics's and
// the claim cache's.
void DescribeGpuPluginMetrics(metrics::Registry* registry);

}  // namespace dra::gpu
