#include "lib/httpserver/connection_metrics.h"

namespace dra::httpserver {

ConnectionMetrics::ConnectionMetrics(metrics::Registry* registry, const std::string& prefix) {
  metrics::Family<metrics::Gauge>* open = &own_open_;
  metrics::Family<metrics::Counter>* rejected = &own_rejected_;
  metrics::Family<metrics::Counter>* timed_out = &own_timed_out_;
  if (registry != nullptr) {
    open = registry->AddGauge(prefix + "_connections_open",
                              "Connections accepted and not yet closed.", {});
    rejected = registry->AddCounter(
        prefix + "_connections_rejected_total",
        "Connections closed right after accept because the server's connection limit was reached.",
        {});
    timed_out = registry->AddCounter(
        prefix + "_connections_timed_out_total",
        "Connections closed by the server because a deadline passed, by phase (handshake, "
        "request, idle, write).",
        {"phase"});
  }
  open_ = open->WithLabels({});
  rejected_ = rejected->WithLabels({});
  timed_out_[static_cast<int>(ConnectionPhase::kHandshake)] = timed_out->WithLabels({"handshake"});
  timed_out_[static_cast<int>(ConnectionPhase::kRequest)] = timed_out->WithLabels({"request"});
  timed_out_[static_cast<int>(ConnectionPhase::kIdle)] = timed_out->WithLabels({"idle"});
  timed_out_[static_cast<int>(ConnectionPhase::kWrite)] = timed_out->WithLabels({"write"});
}

}  // namespace dra::httpserver
