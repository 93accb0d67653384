#pragma once

// The API server's own request counters (GET /metrics with the admin credentials), so that the
// benchmark counts every request the controller and the daemons made, whatever client they use.
//   apiserver_request_total{verb,resource,subresource,code,...}: completed requests. A WATCH is
//     counted when it ends, so watches still open are read from the next gauge instead.
//   apiserver_longrunning_requests{verb="WATCH",resource,...}: watches open now.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "lib/k8s/client.h"

namespace dra::bench {

// "VERB resource[/subresource]", e.g. "PUT computedomaincliques", "PATCH pods/status".
using RequestKey = std::string;

struct RequestCounts {
  std::map<RequestKey, double> total;
  std::map<RequestKey, double> conflicts;  // lost writes: code="409", and "422" on cliques
  std::map<RequestKey, double> open_watches;

  // this - before, dropping rows that did not change.
  RequestCounts Minus(const RequestCounts& before) const;
  double Sum() const;
  double SumConflicts() const;
};

// Parses the Prometheus text exposition of /metrics.
RequestCounts ParseRequestCounts(const std::string& text);

absl::StatusOr<RequestCounts> ScrapeRequestCounts(k8s::Client& client);

// The sum of every sample of the metric `name` (exactly, e.g. "apiserver_watch_events_sizes_sum")
// in the Prometheus text `text` whose labels include each pair of `match`; a sample without
// labels matches an empty `match`. 0 when there is none.
double SumSamples(const std::string& text, const std::string& name,
                  const std::map<std::string, std::string>& match = {});

}  // namespace dra::bench
