#pragma once

// The memory a server (server.h) may hold in request buffers, all connections together. Each
// connection caps its own request (header and body: ServerOptions::max_header_bytes,
// max_body_bytes), but 2048 connections each sending a 3 MiB body would be 6 GiB; a connection
// takes the bytes its request buffer is sized for from this budget before it grows the buffer,
// and gives them back when the buffer is freed. A request whose buffer does not fit is answered
// 503 and its connection closed (Connection), so the process stays within its memory limit
// while the others are served.
//
//   RequestBudget budget(64 << 20, &registry, "nvidia_dra_webhook");
//   if (!budget.TryAcquire(n)) { ...refuse... }
//   ...
//   budget.Release(n);
//
// Metrics (when a registry is given):
//   <prefix>_request_buffer_bytes              gauge    bytes held by request buffers now
//   <prefix>_request_buffer_refused_total      counter  requests refused (503) because their
//                                                       buffer did not fit in the budget
//
// Thread-safety: every method may be called from any thread (atomics).

#include <atomic>
#include <cstddef>
#include <string>

#include "lib/metrics/metrics.h"

namespace dra::httpserver {

class RequestBudget {
 public:
  // `limit`: bytes. `registry` may be null (counted, not exposed); it must outlive this.
  RequestBudget(size_t limit, metrics::Registry* registry, const std::string& prefix);
  RequestBudget(const RequestBudget&) = delete;
  RequestBudget& operator=(const RequestBudget&) = delete;

  // Takes `bytes` when they fit under the limit with what is held, else takes nothing, counts a
  // refused request and returns false.
  bool TryAcquire(size_t bytes);
  // Gives back bytes taken by TryAcquire.
  void Release(size_t bytes);

  size_t limit() const { return limit_; }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  double refused() const { return refused_->Value(); }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
  // Series of the registry's families, or of these when there is no registry.
  metrics::Family<metrics::Gauge> own_bytes_{"", "", {}};
  metrics::Family<metrics::Counter> own_refused_{"", "", {}};
  metrics::Gauge* bytes_;
  metrics::Counter* refused_;
};

}  // namespace dra::httpserver
