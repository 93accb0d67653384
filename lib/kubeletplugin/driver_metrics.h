#pragma once

// DriverMetrics: the metrics of the DRA calls, shared by the GPU and the ComputeDomain plugins.
//
// Thread-safety: the families are thread-safe (lib/metrics/metrics.h); the struct is immutable
// after construction.

#include <string>

#include "lib/metrics/metrics.h"

namespace dra::kubeletplugin {

// The request and device metrics both kubelet plugins export (docs/compatibility.md "Metrics"),
// registered in one registry. Every family carries the driver's name; the error types and the
// device types a plugin counts are its own (it creates their series at zero).
struct DriverMetrics {
  explicit DriverMetrics(metrics::Registry* registry, const std::string& driver,
                         const std::string& node);
  metrics::Family<metrics::Counter>* requests_total;
  metrics::Family<metrics::Histogram>* request_duration_seconds;
  metrics::Family<metrics::Gauge>* requests_inflight;
  metrics::Family<metrics::Gauge>* prepared_devices;
  metrics::Family<metrics::Counter>* prepare_errors_total;
  metrics::Family<metrics::Counter>* unprepare_errors_total;
  const std::string driver;
  const std::string node;
};

}  // namespace dra::kubeletplugin
