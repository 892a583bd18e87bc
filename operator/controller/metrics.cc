#include "operator/controller/metrics.h"

namespace hypertrain::controller {
namespace {

using metrics::ExponentialBuckets;

// controller-runtime's reconcile_time_seconds buckets.
std::vector<double> ReconcileBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
          1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60};
}

}  // namespace

Metrics::WorkQueue::WorkQueue(metrics::Registry* r)
    : adds_(r->AddCounter("workqueue_adds_total", "Total number of adds handled by workqueue", {"name"})
                .With({kControllerName})),
      depth_(r->AddGauge("workqueue_depth", "Current depth of workqueue", {"name"}).With({kControllerName})),
      queue_duration_(r->AddHistogram("workqueue_queue_duration_seconds",
                                      "How long in seconds an item stays in workqueue before being requested",
                                      {"name"}, ExponentialBuckets(1e-8, 10, 10))
                          .With({kControllerName})),
      work_duration_(r->AddHistogram("workqueue_work_duration_seconds",
                                     "How long in seconds processing an item from workqueue takes", {"name"},
                                     ExponentialBuckets(1e-8, 10, 10))
                         .With({kControllerName})),
      retries_(r->AddCounter("workqueue_retries_total", "Total number of retries handled by workqueue", {"name"})
                   .With({kControllerName})) {}

void Metrics::WorkQueue::Added() { adds_.Inc(); }
void Metrics::WorkQueue::Depth(size_t keys) { depth_.Set(static_cast<double>(keys)); }
void Metrics::WorkQueue::Waited(double seconds) { queue_duration_.Observe(seconds); }
void Metrics::WorkQueue::Worked(double seconds) { work_duration_.Observe(seconds); }
void Metrics::WorkQueue::Retried() { retries_.Inc(); }

Metrics::Metrics(metrics::Registry* r)
    : counters(r),
      reconcile_total_(r->AddCounter("controller_runtime_reconcile_total",
                                     "Total number of reconciliations per controller", {"controller", "result"})),
      reconcile_errors_(r->AddCounter("controller_runtime_reconcile_errors_total",
                                      "Total number of reconciliation errors per controller", {"controller"})
                            .With({kControllerName})),
      reconcile_time_(r->AddHistogram("controller_runtime_reconcile_time_seconds",
                                      "Length of time per reconciliation per controller", {"controller"},
                                      ReconcileBuckets())
                          .With({kControllerName})),
      max_concurrent_(r->AddGauge("controller_runtime_max_concurrent_reconciles",
                                  "Maximum number of concurrent reconciles per controller", {"controller"})
                          .With({kControllerName})),
      active_workers_(r->AddGauge("controller_runtime_active_workers",
                                  "Number of currently used workers per controller", {"controller"})
                          .With({kControllerName})),
      workqueue_(r),
      rest_requests_(r->AddCounter("rest_client_requests_total",
                                   "Number of HTTP requests, partitioned by status code, method, and host.",
                                   {"code", "method", "host"})),
      rest_duration_(r->AddHistogram("rest_client_request_duration_seconds",
                                     "Request latency in seconds. Broken down by verb and host.", {"verb", "host"},
                                     {0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0})),
      leader_(r->AddGauge("leader_election_master_status",
                          "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
                          "indicates master. 'name' is the string used to identify the lease.",
                          {"name"})),
      jobs_(r->AddGauge("hypertrain_jobs", "TrainingJobs in the operator's caches.", {"namespace"})) {
  // Every result the dashboards query exists from the start, at zero.
  for (const char* result : {"success", "error", "requeue", "requeue_after"}) {
    reconcile_total_.With({kControllerName, result});
  }
}

void Metrics::ObserveReconcile(const char* result, double seconds) {
  reconcile_total_.With({kControllerName, result}).Inc();
  if (std::string(result) == "error") reconcile_errors_.Inc();
  reconcile_time_.Observe(seconds);
}

void Metrics::SetWorkers(int max_concurrent) { max_concurrent_.Set(max_concurrent); }

void Metrics::WorkerActive(bool active) { active ? active_workers_.Inc() : active_workers_.Dec(); }

void Metrics::ObserveRestClient(kube::RestClient* client, const std::string& host) {
  client->SetRequestObserver([this, host](const kube::RequestRecord& r) {
    // client-go writes "<error>" for an attempt without a response.
    rest_requests_.With({r.code == 0 ? "<error>" : std::to_string(r.code), r.method, host}).Inc();
    rest_duration_.With({r.method, host}).Observe(r.seconds);
  });
}

void Metrics::SetLeader(const std::string& lease_name, bool leading) {
  leading_ = leading;
  leader_.With({lease_name}).Set(leading ? 1 : 0);
}

void Metrics::SetJobs(const std::map<std::string, int>& by_namespace) {
  std::vector<metrics::LabelValues> seen;
  jobs_.ForEach([&](const metrics::LabelValues& ns, const metrics::Gauge&) { seen.push_back(ns); });
  for (const auto& ns : seen) {
    if (!by_namespace.count(ns[0])) jobs_.With(ns).Set(0);
  }
  for (const auto& [ns, n] : by_namespace) jobs_.With({ns}).Set(n);
}

}  // namespace hypertrain::controller
