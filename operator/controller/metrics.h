// The controller's metrics (the reconciler's counters, the work queue, reconcile
// latency, leadership) and their Prometheus text exposition.
#ifndef HYPERTRAIN_OPERATOR_CONTROLLER_METRICS_H_
#define HYPERTRAIN_OPERATOR_CONTROLLER_METRICS_H_

#include <atomic>
#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "operator/controller/reconciler.h"

namespace hypertrain::controller {

// Reconcile latency histogram (seconds), cumulative buckets.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 10> kBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
  void Observe(double seconds);
  std::string Render(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, kBuckets.size()> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct Metrics {
  ReconcilerCounters counters;
  LatencyHistogram reconcile_latency;
  std::atomic<int64_t> reconcile_errors{0};
  std::atomic<int64_t> queue_depth{0};
  std::atomic<int64_t> is_leader{0};  // set by main
  std::atomic<int64_t> jobs_cached{0};

  std::string Render() const;
};

}  // namespace hypertrain::controller

#endif  // HYPERTRAIN_OPERATOR_CONTROLLER_METRICS_H_
