#include "lib/kubeletplugin/driver_metrics.h"

namespace dra::kubeletplugin {

DriverMetrics::DriverMetrics(metrics::Registry* r, const std::string& driver,
                             const std::string& node)
    : requests_total(r->AddCounter("nvidia_dra_requests_total",
                                   "Successful prepare and unprepare requests.",
                                   {"driver", "operation"})),
      request_duration_seconds(r->AddHistogram(
          "nvidia_dra_request_duration_seconds",
          "Duration of successful prepare and unprepare requests, lock wait included.",
          {"driver", "operation"}, metrics::ExponentialBuckets(0.05, 2, 9))),
      requests_inflight(r->AddGauge("nvidia_dra_requests_inflight",
                                    "Prepare and unprepare requests being worked on.",
                                    {"driver", "operation"})),
      prepared_devices(r->AddGauge("nvidia_dra_prepared_devices",
                                   "Devices of completely prepared claims on this node.",
                                   {"node", "driver", "device_type"})),
      prepare_errors_total(r->AddCounter("nvidia_dra_node_prepare_errors_total",
                                         "Failed prepare requests by cause.",
                                         {"driver", "error_type"})),
      unprepare_errors_total(r->AddCounter("nvidia_dra_node_unprepare_errors_total",
                                           "Failed unprepare requests by cause.",
                                           {"driver", "error_type"})),
      driver(driver),
      node(node) {
  for (const char* op : {"prepare", "unprepare"}) {
    requests_total->WithLabels({driver, op});
    requests_inflight->WithLabels({driver, op});
  }
}

}  // namespace dra::kubeletplugin
