#include "lib/httpserver/request_budget.h"

namespace dra::httpserver {

RequestBudget::RequestBudget(size_t limit, metrics::Registry* registry, const std::string& prefix)
    : limit_(limit) {
  metrics::Family<metrics::Gauge>* bytes = &own_bytes_;
  metrics::Family<metrics::Counter>* refused = &own_refused_;
  if (registry != nullptr) {
    bytes = registry->AddGauge(prefix + "_request_buffer_bytes",
                               "Bytes held by the buffers of requests being received, all "
                               "connections together (at most --max-buffered-request-bytes).",
                               {});
    refused = registry->AddCounter(
        prefix + "_request_buffer_refused_total",
        "Requests answered 503 because their buffer would have taken the request buffers of all "
        "connections past --max-buffered-request-bytes.",
        {});
  }
  bytes_ = bytes->WithLabels({});
  refused_ = refused->WithLabels({});
}

bool RequestBudget::TryAcquire(size_t bytes) {
  size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || used > limit_ - bytes) {
      refused_->Inc();
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  bytes_->Inc(static_cast<double>(bytes));
  return true;
}

void RequestBudget::Release(size_t bytes) {
  if (bytes == 0) return;
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  bytes_->Dec(static_cast<double>(bytes));
}

}  // namespace dra::httpserver
