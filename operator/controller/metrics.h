#pragma once
// The operator's Prometheus series, under the names and labels that
// controller-runtime and client-go give them so that dashboards and alerts
// written for Kubernetes controllers work unchanged (docs/OPERATOR.md lists
// them all):
//   controller_runtime_reconcile_total{controller,result}
//   controller_runtime_reconcile_errors_total{controller}
//   controller_runtime_reconcile_time_seconds{controller}        (histogram)
//   controller_runtime_max_concurrent_reconciles{controller}
//   controller_runtime_active_workers{controller}
//   workqueue_depth / _adds_total / _retries_total{name}
//   workqueue_queue_duration_seconds / _work_duration_seconds{name}   (histograms)
//   rest_client_requests_total{code,method,host}
//   rest_client_request_duration_seconds{verb,host}               (histogram)
//   leader_election_master_status{name}
// plus the job counters by namespace (ReconcilerCounters) and
// hypertrain_jobs{namespace}, the TrainingJobs in the caches.

#include <map>
#include <string>

#include "core/metrics.h"
#include "kube/rest_client.h"
#include "kube/workqueue.h"
#include "operator/controller/reconciler.h"

namespace hypertrain::controller {

// The `controller` and workqueue `name` label of every series.
inline constexpr char kControllerName[] = "trainingjob";

class Metrics {
 public:
  // Registers every series in `registry` (which must outlive this).
  explicit Metrics(metrics::Registry* registry);

  ReconcilerCounters counters;

  // One reconcile's outcome: "success", "error" or "requeue_after".
  void ObserveReconcile(const char* result, double seconds);
  void SetWorkers(int max_concurrent);
  void WorkerActive(bool active);  // a worker starts (true) or ends (false) a reconcile
  // The work queue's series (kube::WorkQueueOptions::metrics).
  kube::WorkQueueMetrics* workqueue() { return &workqueue_; }
  // rest_client_* series for every attempt of `client` against `host`.
  void ObserveRestClient(kube::RestClient* client, const std::string& host);
  void SetLeader(const std::string& lease_name, bool leading);
  bool leading() const { return leading_.load(); }
  // TrainingJobs in the caches by namespace (every namespace seen keeps its series).
  void SetJobs(const std::map<std::string, int>& by_namespace);

 private:
  class WorkQueue : public kube::WorkQueueMetrics {
   public:
    explicit WorkQueue(metrics::Registry* r);
    void Added() override;
    void Depth(size_t keys) override;
    void Waited(double seconds) override;
    void Worked(double seconds) override;
    void Retried() override;

   private:
    metrics::Counter& adds_;
    metrics::Gauge& depth_;
    metrics::Histogram& queue_duration_;
    metrics::Histogram& work_duration_;
    metrics::Counter& retries_;
  };

  metrics::Family<metrics::Counter>& reconcile_total_;
  metrics::Counter& reconcile_errors_;
  metrics::Histogram& reconcile_time_;
  metrics::Gauge& max_concurrent_;
  metrics::Gauge& active_workers_;
  WorkQueue workqueue_;
  metrics::Family<metrics::Counter>& rest_requests_;
  metrics::Family<metrics::Histogram>& rest_duration_;
  metrics::Family<metrics::Gauge>& leader_;
  metrics::Family<metrics::Gauge>& jobs_;
  std::atomic<bool> leading_{false};
};

}  // namespace hypertrain::controller
