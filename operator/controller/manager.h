#pragma once
// The controller's wiring, in the shape of sample-controller: per watched
// namespace a TrainingJob informer and informers of the derived objects (Pods,
// ConfigMaps, Services, ServiceAccounts, Roles, RoleBindings; only those
// labelled hypertrain.dev/job-name: the progress ConfigMaps carry the
// launchers' reports; Services to RoleBindings metadata only) enqueue job keys
// (by that label and by owner), so that the reconciler neither uses a foreign
// namesake nor creates what exists. Each cache keeps only what is read
// (cache_transforms.h); one
// cluster-wide Node informer re-queues every job when a node's labels or
// conditions change or it goes away; `workers` threads take keys from the
// queue (never one key on two workers at once) and reconcile them:
// success forgets the key's backoff (and re-adds it after requeue_after),
// an error re-adds it with per-key exponential backoff.
//
// Run is one leadership term: main calls it while it holds the Lease.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kube/cancel.h"
#include "kube/rest_client.h"
#include "operator/controller/metrics.h"

namespace hypertrain::controller {

struct ManagerOptions {
  std::shared_ptr<kube::RestClient> client;
  std::vector<std::string> namespaces;  // empty: every namespace
  int workers = 2;
  std::string identity = "hypertrain-operator";  // the Events' reportingInstance
  std::chrono::milliseconds fault_settle_window{5000};  // see ReconcilerOptions
  Metrics* metrics = nullptr;  // optional; must outlive the manager
  int max_parallel_creates = 16;  // see ReconcilerOptions
  // Watching every namespace, TrainingJobs here are never acted on: the
  // cluster's own namespaces get no trainer pods, ServiceAccounts or Roles
  // (the job gets Created=False/NamespaceExcluded and a Warning Event).
  std::set<std::string> excluded_namespaces = {"kube-system", "kube-public", "kube-node-lease"};
};

class Manager {
 public:
  explicit Manager(ManagerOptions opts);

  // True while a term's caches are synced (the operator's readiness).
  bool synced() const { return synced_.load(); }
  // TrainingJobs in the caches by namespace; empty outside a term (for the
  // hypertrain_jobs gauge, read at scrape time).
  std::map<std::string, int> JobsByNamespace() const;

  // Starts the informers, waits for their first LIST, then reconciles until
  // `stop` fires; then stops the workers (an in-flight reconcile finishes,
  // queued keys are dropped: the next leader relists) and the informers.
  // Blocks; a later call starts a new term from empty caches.
  void Run(kube::CancelToken* stop);

 private:
  struct Term;
  void StartInformers(Term& t);
  bool WaitForCaches(Term& t, kube::CancelToken* stop);
  void Work(Term& t, kube::CancelToken* stop);
  void ReconcileKey(Term& t, const std::string& key);

  // Logs a job in an excluded namespace once.
  bool FirstWarning(const std::string& key);

  ManagerOptions o_;
  std::atomic<bool> synced_{false};
  mutable std::mutex term_mu_;
  Term* term_ = nullptr;  // the running term once synced
  std::mutex warned_mu_;
  std::set<std::string> warned_;
};

}  // namespace hypertrain::controller
