#include "lib/metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace dra::metrics {
namespace {

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  // The shortest text that reads back as the same double ("0.05", not "0.05000000000000000277").
  for (int precision = 1; precision < 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

std::string Labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra_name.empty()) {
    absl::StrAppend(&out, out.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
  }
  return out.empty() ? out : absl::StrCat("{", out, "}");
}

void Header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.Add(v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i, start *= factor) out.push_back(start);
  return out;
}

Family<Counter>* Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  counters_.push_back(
      std::make_unique<Family<Counter>>(std::move(name), std::move(help), std::move(labels)));
  order_.emplace_back(Type::kCounter, counters_.size() - 1);
  return counters_.back().get();
}

Family<Gauge>* Registry::AddGauge(std::string name, std::string help,
                                  std::vector<std::string> labels) {
  absl::MutexLock lock(&mu_);
  gauges_.push_back(
      std::make_unique<Family<Gauge>>(std::move(name), std::move(help), std::move(labels)));
  order_.emplace_back(Type::kGauge, gauges_.size() - 1);
  return gauges_.back().get();
}

Family<Histogram>* Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> labels,
                                          std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  histograms_.push_back(std::make_unique<Family<Histogram>>(std::move(name), std::move(help),
                                                            std::move(labels), std::move(bounds)));
  order_.emplace_back(Type::kHistogram, histograms_.size() - 1);
  return histograms_.back().get();
}

std::vector<Registry::FamilyInfo> Registry::Describe() const {
  absl::MutexLock lock(&mu_);
  std::vector<FamilyInfo> out;
  auto add = [&](const auto& f, Type type) {
    out.push_back({f.name(), type, f.label_names(), f.help()});
  };
  for (const auto& [type, index] : order_) {
    switch (type) {
      case Type::kCounter:
        add(*counters_[index], type);
        break;
      case Type::kGauge:
        add(*gauges_[index], type);
        break;
      case Type::kHistogram:
        add(*histograms_[index], type);
        break;
    }
  }
  return out;
}

std::string DescribeMarkdown(const Registry& registry) {
  std::vector<Registry::FamilyInfo> families = registry.Describe();
  std::sort(families.begin(), families.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::string out;
  for (const auto& f : families) {
    const char* type = f.type == Type::kCounter ? "counter"
                       : f.type == Type::kGauge ? "gauge"
                                                : "histogram";
    std::string labels = f.labels.empty() ? "-" : "`" + absl::StrJoin(f.labels, "`, `") + "`";
    absl::StrAppend(&out, "| `", f.name, "` | ", type, " | ", labels, " | ",
                    absl::StrReplaceAll(f.help, {{"|", "\\|"}}), " |\n");
  }
  return out;
}

std::string Registry::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [type, index] : order_) {
    switch (type) {
      case Type::kCounter: {
        const auto& f = *counters_[index];
        Header(out, f.name(), f.help(), "counter");
        f.ForEach([&](const auto& labels, const Counter& c) {
          absl::StrAppend(&out, f.name(), Labels(f.label_names(), labels), " ",
                          FormatValue(c.Value()), "\n");
        });
        break;
      }
      case Type::kGauge: {
        const auto& f = *gauges_[index];
        Header(out, f.name(), f.help(), "gauge");
        f.ForEach([&](const auto& labels, const Gauge& g) {
          absl::StrAppend(&out, f.name(), Labels(f.label_names(), labels), " ",
                          FormatValue(g.Value()), "\n");
        });
        break;
      }
      case Type::kHistogram: {
        const auto& f = *histograms_[index];
        Header(out, f.name(), f.help(), "histogram");
        f.ForEach([&](const auto& labels, const Histogram& h) {
          std::vector<uint64_t> counts = h.CumulativeCounts();
          for (size_t i = 0; i < counts.size(); ++i) {
            std::string le = i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf";
            absl::StrAppend(&out, f.name(), "_bucket", Labels(f.label_names(), labels, "le", le),
                            " ", counts[i], "\n");
          }
          absl::StrAppend(&out, f.name(), "_sum", Labels(f.label_names(), labels), " ",
                          FormatValue(h.Sum()), "\n");
          absl::StrAppend(&out, f.name(), "_count", Labels(f.label_names(), labels), " ", h.Count(),
                          "\n");
        });
        break;
      }
    }
  }
  return out;
}

}  // namespace dra::metrics
