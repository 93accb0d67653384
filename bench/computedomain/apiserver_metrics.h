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

}  // namespace dra::bench
