#pragma once

// bench/podstart's bookkeeping: when the bench saw each pod reach each start stage (from a watch
// on the pods, client-side times in milliseconds, not the second-granular condition stamps), the
// percentiles it prints, and the plugin's and kubelet's Prometheus text it reads the prepare time
// from.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace dra::bench {

// The start stages of a pod in order; each is the first time the bench saw it.
struct PodTimeline {
  absl::Time created;                 // just before the create request
  std::optional<absl::Time> claimed;  // status.resourceClaimStatuses set (template claims made)
  std::optional<absl::Time> bound;    // spec.nodeName set: scheduled (claims allocated)
  std::optional<absl::Time> sandbox;  // condition PodReadyToStartContainers True
  std::optional<absl::Time> running;  // status.phase Running
  std::string failure;                // a Failed phase or a Warning reason seen, for the report

  // Records what `pod` (a Pod object seen at `seen`) shows that was not seen before.
  void Observe(const nlohmann::json& pod, absl::Time seen);
};

// Nearest-rank percentile (`p` in [0, 1]) of `v`; 0 when empty.
double Percentile(std::vector<double> v, double p);

// Milliseconds from `from` to `to`, when both are known and in order.
std::optional<double> StageMs(const std::optional<absl::Time>& from,
                              const std::optional<absl::Time>& to);

// The sum of the samples of `metric` (a Prometheus text exposition) whose labels include every
// `key="value"` of `labels`; nullopt when no sample matches.
std::optional<double> SumSamples(const std::string& text, const std::string& metric,
                                 const std::map<std::string, std::string>& labels);

}  // namespace dra::bench
