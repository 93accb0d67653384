#include "bench/computedomain/apiserver_metrics.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace dra::bench {
namespace {

// `name{k="v",...} value` -> labels and value; false for other lines.
bool ParseSample(absl::string_view line, absl::string_view name,
                 std::map<std::string, std::string>* labels, double* value) {
  if (!absl::StartsWith(line, name) || line.size() <= name.size() || line[name.size()] != '{') {
    return false;
  }
  size_t close = line.rfind('}');
  if (close == absl::string_view::npos) return false;
  absl::string_view body = line.substr(name.size() + 1, close - name.size() - 1);
  // Label values here never contain '"' or ',' (verbs, resources, codes).
  for (absl::string_view pair : absl::StrSplit(body, ',', absl::SkipEmpty())) {
    size_t eq = pair.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view v = pair.substr(eq + 1);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    (*labels)[std::string(pair.substr(0, eq))] = std::string(v);
  }
  *value = std::strtod(std::string(line.substr(close + 1)).c_str(), nullptr);
  return true;
}

RequestKey KeyOf(std::map<std::string, std::string>& l) {
  RequestKey k = absl::StrCat(l["verb"], " ", l["resource"]);
  if (!l["subresource"].empty()) absl::StrAppend(&k, "/", l["subresource"]);
  return k;
}

void SubtractInto(const std::map<RequestKey, double>& now, const std::map<RequestKey, double>& then,
                  std::map<RequestKey, double>* out) {
  for (const auto& [k, v] : now) {
    auto it = then.find(k);
    double d = v - (it == then.end() ? 0 : it->second);
    if (d != 0) (*out)[k] = d;
  }
  for (const auto& [k, v] : then) {
    if (!now.contains(k) && v != 0) (*out)[k] = -v;
  }
}

}  // namespace

RequestCounts ParseRequestCounts(const std::string& text) {
  RequestCounts c;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::map<std::string, std::string> labels;
    double v = 0;
    if (ParseSample(line, "apiserver_request_total", &labels, &v)) {
      RequestKey k = KeyOf(labels);
      // A 422 on a clique is a daemon's JSON patch whose "test" failed: a lost write, like a 409.
      // Other 403s and 422s are the fence against other controllers (sim_domain.cc): their rows.
      const bool clique = labels["resource"] == "computedomaincliques";
      const bool lost = labels["code"] == "409" || (labels["code"] == "422" && clique);
      if (labels["code"] == "403" || (labels["code"] == "422" && !clique)) {
        absl::StrAppend(&k, " (denied)");
      }
      c.total[k] += v;
      if (lost) c.conflicts[k] += v;
    } else if (ParseSample(line, "apiserver_longrunning_requests", &labels, &v) &&
               labels["verb"] == "WATCH") {
      c.open_watches[KeyOf(labels)] += v;
    }
  }
  return c;
}

RequestCounts RequestCounts::Minus(const RequestCounts& before) const {
  RequestCounts d;
  SubtractInto(total, before.total, &d.total);
  SubtractInto(conflicts, before.conflicts, &d.conflicts);
  SubtractInto(open_watches, before.open_watches, &d.open_watches);
  return d;
}

double RequestCounts::Sum() const {
  double s = 0;
  for (const auto& [k, v] : total) s += v;
  return s;
}

double RequestCounts::SumConflicts() const {
  double s = 0;
  for (const auto& [k, v] : conflicts) s += v;
  return s;
}

double SumSamples(const std::string& text, const std::string& name,
                  const std::map<std::string, std::string>& match) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::map<std::string, std::string> labels;
    double v = 0;
    if (ParseSample(line, name, &labels, &v)) {
      bool all = true;
      for (const auto& [k, want] : match) {
        auto it = labels.find(k);
        all = all && it != labels.end() && it->second == want;
      }
      if (all) sum += v;
    } else if (match.empty() && absl::StartsWith(line, name) && line.size() > name.size() &&
               line[name.size()] == ' ') {
      sum += std::strtod(std::string(line.substr(name.size() + 1)).c_str(), nullptr);
    }
  }
  return sum;
}

absl::StatusOr<RequestCounts> ScrapeRequestCounts(k8s::Client& client) {
  absl::StatusOr<std::string> text = client.GetRaw("/metrics");
  if (!text.ok()) return text.status();
  return ParseRequestCounts(*text);
}

}  // namespace dra::bench
