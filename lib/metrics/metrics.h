#pragma once

// Prometheus metrics: counter, gauge and histogram families with labels, rendered in the text
// exposition format (version 0.0.4). Small and allocation-free on the hot path once a series
// exists: WithLabels() returns a stable pointer that callers may keep.
//
// Thread-safety: everything here may be used from any thread.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace dra::metrics {

// A value that can be added to atomically (doubles have no fetch_add before C++20 on all
// targets we use, so this is a CAS loop).
class AtomicDouble {
 public:
  void Add(double v) {
    double cur = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
    }
  }
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Counter {
 public:
  void Inc(double v = 1) { value_.Add(v); }
  double Value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Gauge {
 public:
  void Set(double v) { value_.Set(v); }
  void Inc(double v = 1) { value_.Add(v); }
  void Dec(double v = 1) { value_.Add(-v); }
  double Value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  // Cumulative counts per bound (last entry: +Inf), sum and count.
  std::vector<uint64_t> CumulativeCounts() const;
  double Sum() const { return sum_.Get(); }
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1 (for +Inf)
  AtomicDouble sum_;
  std::atomic<uint64_t> count_{0};
};

// Exponential buckets: start, start*factor, ... (count values), like Prometheus' client.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

enum class Type { kCounter, kGauge, kHistogram };

// One metric name with a fixed set of label names and one series per label-value tuple.
template <typename T>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds = {})
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}

  // Returns the series for these label values (in label-name order), creating it at zero.
  // REQUIRES: values.size() == label names count.
  T* WithLabels(const std::vector<std::string>& values) {
    absl::MutexLock lock(&mu_);
    auto it = series_.find(values);
    if (it != series_.end()) return it->second.get();
    std::unique_ptr<T> s;
    if constexpr (std::is_same_v<T, Histogram>) {
      s = std::make_unique<Histogram>(bounds_);
    } else {
      s = std::make_unique<T>();
    }
    T* raw = s.get();
    series_.emplace(values, std::move(s));
    return raw;
  }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  template <typename Fn>
  void ForEach(Fn fn) const {
    absl::MutexLock lock(&mu_);
    for (const auto& [labels, series] : series_) fn(labels, *series);
  }

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> series_ ABSL_GUARDED_BY(mu_);
};

// A set of families rendered together. Families are owned by the registry and live as long as it.
class Registry {
 public:
  Family<Counter>* AddCounter(std::string name, std::string help, std::vector<std::string> labels);
  Family<Gauge>* AddGauge(std::string name, std::string help, std::vector<std::string> labels);
  Family<Histogram>* AddHistogram(std::string name, std::string help,
                                  std::vector<std::string> labels, std::vector<double> bounds);

  // The whole registry in Prometheus text format, families in registration order.
  std::string Render() const;

  // What each family is, without its series, in registration order (for a metrics reference
  // generated from the code, DescribeMarkdown).
  struct FamilyInfo {
    std::string name;
    Type type;
    std::vector<std::string> labels;
    std::string help;
  };
  std::vector<FamilyInfo> Describe() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family<Counter>>> counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_ ABSL_GUARDED_BY(mu_);
  // Render order: (type, index into the matching vector).
  std::vector<std::pair<Type, size_t>> order_ ABSL_GUARDED_BY(mu_);
};

// Escapes a label value for the text format (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& v);

// The registry's families as Markdown table rows, one a line, sorted by name:
// "| `name` | counter | `label`, `label` | help |" (labels "-" when none; a '|' in the help is
// escaped): the rows of a metrics reference table generated from a registry the binary's
// components registered their families in.
std::string DescribeMarkdown(const Registry& registry);

}  // namespace dra::metrics
