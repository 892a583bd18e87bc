#pragma once
// Prometheus metrics: counters, gauges and histograms in labelled families,
// one registry per binary, and the text exposition format (version 0.0.4)
// that Prometheus scrapes. prometheus-cpp, the usual C++ client, is not
// packaged for Debian 12, so the data model lives here; core/http_server.h
// (civetweb) serves it.
//
//   metrics::Registry r;
//   auto& total = r.AddCounter("controller_runtime_reconcile_total", "Reconciles by result.",
//                              {"controller", "result"});
//   total.With({"trainingjob", "success"}).Inc();
//   r.Render();  // # HELP ... # TYPE ... controller_runtime_reconcile_total{controller="trainingjob",...} 1
//
// Thread-safe. A family's series are created at zero on first use and live
// as long as the registry, so references to them stay valid; updates of a
// counter or gauge are lock-free, a histogram takes a short lock.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hypertrain::metrics {

using LabelValues = std::vector<std::string>;

class Counter {
 public:
  void Inc(double v = 1) { v_.fetch_add(v, std::memory_order_relaxed); }
  double Value() const { return v_.load(std::memory_order_relaxed); }
  // For a counter kept elsewhere and copied at scrape (the kernel's CPU time).
  void SetFromSource(double v) { v_.store(v, std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1) { v_.fetch_add(v, std::memory_order_relaxed); }
  void Dec(double v = 1) { v_.fetch_sub(v, std::memory_order_relaxed); }
  double Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Cumulative buckets with inclusive upper bounds (le), plus +Inf, sum, count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // ascending, finite
  void Observe(double v);
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Snap() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0;
};

// `count` bounds start, start*factor, ... (client_golang's ExponentialBuckets).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

enum class Type { kCounter, kGauge, kHistogram };

// A metric name with its help text, label names and series.
template <class M>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> labels, std::vector<double> bounds = {})
      : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)), bounds_(std::move(bounds)) {}

  // The series with these label values, one per label name in order (a
  // mismatch is a programming error and aborts, naming the metric).
  M& With(const LabelValues& values);
  M& With() { return With(LabelValues{}); }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labels() const { return labels_; }
  // Visits every series in label-value order.
  void ForEach(const std::function<void(const LabelValues&, const M&)>& f) const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> labels_;
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<LabelValues, std::unique_ptr<M>> series_;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registering a name twice, or a name or label that Prometheus would
  // refuse, is a programming error and aborts.
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> labels = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                  std::vector<double> bounds);

  // Runs before every Render: brings gauges read from elsewhere up to date
  // (process state, cache sizes).
  void OnScrape(std::function<void()> update);

  // The text exposition, families in registration order.
  std::string Render() const;

 private:
  struct Entry {
    Type type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
  };
  void CheckNew(const std::string& name, const std::vector<std::string>& labels) const;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::vector<std::function<void()>> on_scrape_;
};

// The process_* metrics of client_golang's process collector, read from
// /proc/self at each scrape: process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, process_start_time_seconds.
void AddProcessMetrics(Registry* registry);

// A number as the exposition writes it: integers without a fraction,
// +Inf/-Inf/NaN by name, otherwise shortest round-trip.
std::string FormatValue(double v);
// A label value with \\, \" and \n escaped.
std::string EscapeLabelValue(const std::string& v);

// ---- implementation of the templates ----

[[noreturn]] void Die(const std::string& what);

template <class M>
M& Family<M>::With(const LabelValues& values) {
  if (values.size() != labels_.size()) {
    Die("metric " + name_ + " has " + std::to_string(labels_.size()) + " labels, got " +
        std::to_string(values.size()) + " values");
  }
  std::lock_guard<std::mutex> l(mu_);
  auto& slot = series_[values];
  if (!slot) {
    if constexpr (std::is_same_v<M, Histogram>) {
      slot = std::make_unique<Histogram>(bounds_);
    } else {
      slot = std::make_unique<M>();
    }
  }
  return *slot;
}

template <class M>
void Family<M>::ForEach(const std::function<void(const LabelValues&, const M&)>& f) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [values, m] : series_) f(values, *m);
}

}  // namespace hypertrain::metrics
