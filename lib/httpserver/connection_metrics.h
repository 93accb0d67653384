#pragma once

// Connection metrics of a server (server.h: the metrics/health endpoints, the webhook), registered
// under a prefix:
//   <prefix>_connections_open                 gauge    connections accepted and not yet closed
//   <prefix>_connections_rejected_total       counter  accepted and closed at once: at the limit
//   <prefix>_connections_timed_out_total      counter  closed by the server when a deadline
//                                                       passed; label phase: handshake, request,
//                                                       idle, write
//
// Thread-safety: the methods may be called from any thread.

#include <string>

#include "lib/metrics/metrics.h"

namespace dra::httpserver {

enum class ConnectionPhase { kHandshake, kRequest, kIdle, kWrite };

class ConnectionMetrics {
 public:
  // `registry` null: counted but not exposed (tests, servers without a registry). `registry`
  // must outlive this.
  ConnectionMetrics(metrics::Registry* registry, const std::string& prefix);

  void Opened() { open_->Inc(); }
  void Closed() { open_->Dec(); }
  void Rejected() { rejected_->Inc(); }
  void TimedOut(ConnectionPhase phase) { timed_out_[static_cast<int>(phase)]->Inc(); }

  double open() const { return open_->Value(); }
  double rejected() const { return rejected_->Value(); }
  double timed_out(ConnectionPhase phase) const {
    return timed_out_[static_cast<int>(phase)]->Value();
  }

 private:
  // Series of the registry's families, or of these when there is no registry.
  metrics::Family<metrics::Gauge> own_open_{"", "", {}};
  metrics::Family<metrics::Counter> own_rejected_{"", "", {}};
  metrics::Family<metrics::Counter> own_timed_out_{"", "", {"phase"}};
  metrics::Gauge* open_;
  metrics::Counter* rejected_;
  metrics::Counter* timed_out_[4];
};

}  // namespace dra::httpserver
