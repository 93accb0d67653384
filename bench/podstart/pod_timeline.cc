#include "bench/podstart/pod_timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dra::bench {

void PodTimeline::Observe(const nlohmann::json& pod, absl::Time seen) {
  const nlohmann::json& status = pod.value("status", nlohmann::json::object());
  auto mark = [&](std::optional<absl::Time>& t) {
    if (!t) t = seen;
  };
  if (status.contains("resourceClaimStatuses") && !status["resourceClaimStatuses"].empty()) {
    mark(claimed);
  }
  if (!pod.value("spec", nlohmann::json::object()).value("nodeName", "").empty()) mark(bound);
  for (const auto& c : status.value("conditions", nlohmann::json::array())) {
    if (c.value("type", "") == "PodReadyToStartContainers" && c.value("status", "") == "True") {
      mark(sandbox);
    }
  }
  const std::string phase = status.value("phase", "");
  if (phase == "Running") {
    // A kubelet that reports Running in the same update as the sandbox condition.
    mark(sandbox);
    mark(running);
  }
  if (phase == "Failed" && failure.empty()) failure = status.value("message", "phase Failed");
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p * static_cast<double>(v.size()));
  const size_t i = rank < 1 ? 0 : std::min(v.size() - 1, static_cast<size_t>(rank) - 1);
  return v[i];
}

std::optional<double> StageMs(const std::optional<absl::Time>& from,
                              const std::optional<absl::Time>& to) {
  if (!from || !to || *to < *from) return std::nullopt;
  return absl::ToDoubleMilliseconds(*to - *from);
}

std::optional<double> SumSamples(const std::string& text, const std::string& metric,
                                 const std::map<std::string, std::string>& labels) {
  std::istringstream in(text);
  std::string line;
  std::optional<double> sum;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!absl::StartsWith(line, metric)) continue;
    const size_t after = metric.size();
    if (after < line.size() && line[after] != '{' && line[after] != ' ') continue;
    const size_t close = line.find('}');
    const std::string label_part =
        line[after] == '{' && close != std::string::npos ? line.substr(after, close - after) : "";
    bool match = true;
    for (const auto& [k, v] : labels) {
      if (!absl::StrContains(label_part, absl::StrCat(k, "=\"", v, "\""))) match = false;
    }
    if (!match) continue;
    const size_t value_at = line.find(' ', close == std::string::npos ? after : close);
    if (value_at == std::string::npos) continue;
    sum = sum.value_or(0) + std::strtod(line.c_str() + value_at + 1, nullptr);
  }
  return sum;
}

}  // namespace dra::bench
