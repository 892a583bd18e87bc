#include "operator/controller/metrics.h"

#include <sstream>

namespace hypertrain::controller {
namespace {

void Counter(std::ostringstream& o, const char* name, const char* help, int64_t v, const char* type = "counter") {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n" << name << " " << v << "\n";
}

}  // namespace

void LatencyHistogram::Observe(double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++counts_[i];
  }
  ++count_;
  sum_ += seconds;
}

std::string LatencyHistogram::Render(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  std::ostringstream o;
  o << "# HELP " << name << " Time to reconcile one TrainingJob.\n# TYPE " << name << " histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    o << name << "_bucket{le=\"" << kBuckets[i] << "\"} " << counts_[i] << "\n";
  }
  o << name << "_bucket{le=\"+Inf\"} " << count_ << "\n" << name << "_sum " << sum_ << "\n" << name << "_count "
    << count_ << "\n";
  return o.str();
}

std::string Metrics::Render() const {
  std::ostringstream o;
  Counter(o, "hypertrain_jobs_created_total", "TrainingJobs whose pods were first created.", counters.jobs_created);
  Counter(o, "hypertrain_jobs_succeeded_total", "TrainingJobs that succeeded.", counters.jobs_succeeded);
  Counter(o, "hypertrain_jobs_failed_total", "TrainingJobs that failed.", counters.jobs_failed);
  Counter(o, "hypertrain_jobs_restarted_total", "Gang restarts.", counters.jobs_restarted);
  Counter(o, "hypertrain_pods_created_total", "Pods created.", counters.pods_created);
  Counter(o, "hypertrain_api_errors_total", "Failed Kubernetes API calls.", counters.api_errors);
  Counter(o, "hypertrain_reconcile_errors_total", "Reconciles that returned an error.", reconcile_errors);
  Counter(o, "hypertrain_workqueue_depth", "Keys waiting in the work queue.", queue_depth, "gauge");
  Counter(o, "hypertrain_leader", "1 while this replica holds the leader Lease.", is_leader, "gauge");
  Counter(o, "hypertrain_jobs_cached", "TrainingJobs in the informer caches.", jobs_cached, "gauge");
  o << reconcile_latency.Render("hypertrain_reconcile_duration_seconds");
  return o.str();
}

}  // namespace hypertrain::controller
