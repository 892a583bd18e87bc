#pragma once
// The TrainingJob reconciler: level-triggered and idempotent. Each call looks
// at the cached job and its pods and moves the world one step toward the spec:
//
//   invalid spec (api::ParseSpec)      → Failed/InvalidSpec, nothing created
//   finished                           → cleanPodPolicy, then TTL deletion
//   estimateOnly, never started        → status.estimate (the dry run's
//                                        estimate), Estimated; nothing created
//   deadline passed                    → Failed/DeadlineExceeded
//   suspend                            → delete pods, Suspended (status kept)
//   pods of an older attempt exist     → delete them and wait until they are gone
//                                        (their GPUs/EFA must be free first)
//   a pod failed                       → non-retryable exit code: Failed at once;
//                                        budget left: gang restart (next attempt),
//                                        else Failed/BackoffLimitExceeded
//   only follow-on exits (200/201) so  → wait up to fault_settle_window for the
//   far, other pods still running        root cause's own status (requeue); a
//                                        node fault of a running pod acts at once
//   a pod's node turned unhealthy      → gang restart (NodeUnhealthy), node counted
//   a pod's node NotReady past grace   → gang restart (PodLost), node counted
//   every node's pod exited 0          → Succeeded
//   otherwise                          → Service, ConfigMap, missing pods (first the
//                                        trainer's ServiceAccount and its progress
//                                        ConfigMap, Role and RoleBinding); Running
//                                        once every pod runs
//   elastic (spec.elastic, elastic.h):
//   gang not all Running within the    → above minNodes: next attempt on as many
//   scheduling timeout                   nodes as fit (Resized), no retry spent
//   running below maxNodes             → nodes able to host a pod again and
//                                        minResizeIntervalSeconds passed: next
//                                        attempt larger (Resized); else re-check
//                                        every checkIntervalSeconds
//
// Each pass: read the caches (observed.h) → Decide (plan.h, pure: one function
// per row above; faults.h classifies faults) → write the status once → act →
// emit events. Objects have deterministic names, so a crash between steps or a
// second reconcile of a stale cache creates no duplicates. Nothing the caches
// hold is created again, and no object is used that does not carry the job's
// controller ownerReference (UID checked): one under the job's name made by
// someone else, in the caches or read back after a 409 AlreadyExists, stops the
// job with Created=False/OwnershipConflict and a Warning naming it. The
// progress ConfigMap, which the trainer's token may patch, gets its
// controller reference and labels back and loses foreign finalizers on every
// pass, and once the job is gone, so it never outlives the job. Status is written only through /status, only when it changed, with
// the cached resourceVersion (a stale cache gets 409 and is retried), and
// before any action, so a fault is counted once. Pods are created only after a
// fresh GET shows the cache is current. Events are emitted after the status
// write that recorded the transition (even when an action then fails). A create
// the API server refuses is reported back (DecideActFailure): a second status
// write (Failed/InvalidSpec, or Created=False/PodCreationFailed with a capped
// retry), the partial gang deleted, a Warning Event; never a pod counted as
// created that does not exist.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/status.h"
#include "kube/resources.h"
#include "kube/store.h"
#include "operator/controller/plan.h"

namespace hypertrain::controller {

// The TrainingJob resource type for the kube client.
kube::ResourceType TrainingJobType();

// The reconciler's counters, each by `namespace` (hypertrain_jobs_created_total,
// ..._succeeded_, ..._failed_, ..._restarted_, hypertrain_pods_created_total,
// hypertrain_api_errors_total), registered in `registry`.
struct ReconcilerCounters {
  explicit ReconcilerCounters(metrics::Registry* registry);
  using Family = metrics::Family<metrics::Counter>;
  Family* jobs_created;
  Family* jobs_succeeded;
  Family* jobs_failed;
  Family* jobs_restarted;
  Family* pods_created;
  Family* api_errors;
};

struct ReconcilerOptions {
  std::shared_ptr<kube::RestClient> client;
  const kube::Store* jobs = nullptr;  // TrainingJob informer cache
  const kube::Store* pods = nullptr;  // Pod informer cache (owner-uid index)
  // Node informer cache (keys are node names); null disables node-health checks.
  const kube::Store* nodes = nullptr;
  // ConfigMap informer cache holding the jobs' progress ConfigMaps
  // (<job>-progress); null: no progress in status.
  const kube::Store* configmaps = nullptr;
  // Caches of the job's other derived objects (those labelled
  // hypertrain.dev/job-name; metadata only, ownerReferences kept). Decide
  // reads their owners (a foreign object fails the job); Act sends no create
  // for an object that its cache (these, `pods` or `configmaps`) holds under
  // that name: the API server would answer 409. A cache that lags is caught by
  // the 409, read back by name and checked for its owner. Null: always sent.
  const kube::Store* services = nullptr;
  const kube::Store* service_accounts = nullptr;
  const kube::Store* roles = nullptr;
  const kube::Store* role_bindings = nullptr;
  // Jobs in these namespaces get Created=False/NamespaceExcluded and a
  // Warning, nothing else (--exclude-namespaces).
  std::set<std::string> excluded_namespaces;
  // One pass creates its pods in slow-start batches of 1, 2, 4, ... at most
  // this many at once (the ReplicaSet controller's), so a refused gang costs
  // one call, a large one is not sent one by one.
  int max_parallel_creates = 16;
  // Expectations (see Cached): the manager's reconcilers, whose caches lag
  // the server by a watch event; off where a test drives the caches itself.
  bool expect_creates = false;
  std::function<Clock::time_point()> now = [] { return Clock::now(); };
  // See Settle in faults.h: how long a follow-on exit (200/201) waits for the
  // root cause's status while other pods run. 0 disables the wait.
  std::chrono::milliseconds fault_settle_window{5000};
  std::string instance = "hypertrain-operator";  // Event reportingInstance
  ReconcilerCounters* counters = nullptr;        // optional
};

struct ReconcileResult {
  // Reconcile again after this long (deadline, TTL, waiting for deletions).
  std::optional<std::chrono::milliseconds> requeue_after;
};

class Reconciler {
 public:
  explicit Reconciler(ReconcilerOptions opts);
  // `key` is "namespace/name". Errors are API failures; the caller requeues
  // with backoff.
  StatusOr<ReconcileResult> Reconcile(const std::string& key);

 private:
  Observed Observe(const api::ObjectMeta& meta, const kube::Json& job, Clock::time_point now);
  // The caches' objects under the job's derived names into in->objects.
  void ObserveObjects(const api::ObjectMeta& meta, const kube::Json& job, Observed* in);
  // After a create answered 409: the object under that name, read back
  // (LIST by name, the verb the informers hold); ok when it is the job's.
  // Otherwise the 409, with `*existing` set when it is another's.
  Status CheckExisting(const api::ObjectMeta& job, const Action& a, const Status& conflict,
                       std::optional<ObservedObject>* existing);
  // A job gone from the cache: its progress ConfigMap, when the trainer's
  // token stripped its controller reference or added finalizers, gets the
  // operator's metadata back, so the garbage collector removes it.
  Status ReleaseProgress(const std::string& ns, const std::string& name);
  // The progress ConfigMap's UID the reconciler knows as the job's (it made
  // it, or saw it with the job's controller reference); by job key.
  struct KnownProgress {
    std::string job_uid, cm_uid;
  };
  std::optional<KnownProgress> KnownProgressOf(const std::string& job_key);
  void RememberProgress(const std::string& job_key, const std::string& job_uid, const std::string& cm_uid);
  StatusOr<bool> CacheIsCurrent(const kube::ResourceClient& jobs, const kube::Json& job);
  // Writes `next` when it differs from `job`'s status; `*job` becomes the
  // server's copy after the write (for a second write in the same pass).
  StatusOr<bool> WriteStatus(const kube::ResourceClient& jobs, kube::Json* job, const api::TrainingJobStatus& before,
                             const api::TrainingJobStatus& next);
  // Stops at the first failing action; `*failed` is its index, and exactly
  // actions[0, *failed) took effect. `*existing`: the object a create
  // answered 409 for (a cache that lags), when not the job's.
  // `spec`: the job's parsed spec, which pods are built from (null when it
  // did not parse: no pod is created then).
  Status Act(const api::ObjectMeta& job, const api::TrainingJobSpec* spec, const std::vector<Action>& actions,
             size_t* failed, std::optional<ObservedObject>* existing);
  // The kCreatePod run actions[begin, end) in slow-start batches, each pod
  // built just before its batch is sent (only a batch is held as JSON); on a
  // failure the failing batch's pods past the first refused one are deleted.
  Status CreatePods(const api::ObjectMeta& job, const api::TrainingJobSpec* spec, const std::vector<Action>& actions,
                    size_t begin, size_t end, size_t* failed, std::optional<ObservedObject>* existing);
  // The cache holds an object of the create action's kind and name, or this
  // reconciler created it less than kExpectCreated ago and the cache has not
  // shown it yet (the ReplicaSet controller's expectations): a pass racing the
  // watch would otherwise POST it again and get 409. `*awaited` is set then.
  bool Cached(const std::string& ns, const Action& a, bool* awaited = nullptr);
  void ExpectCreated(const std::string& ns, const Action& a);
  // Drops the namespace's expectations whose object the cache now shows (or
  // that lapsed), and one whose object this reconciler deletes.
  void SettleExpectations(const std::string& ns);
  void ForgetExpectation(const std::string& ns, Action::Kind kind, const std::string& name);
  void Emit(const api::ObjectMeta& meta, const std::vector<Event>& events, const std::string& now);
  Status Count(const std::string& ns, Status e);
  void Bump(ReconcilerCounters::Family* ReconcilerCounters::*counter, const std::string& ns);
  // The first-seen times of `pods` that this reconciler remembers (failed pods
  // it saw before; entries long past any settle window are dropped first), and
  // the recording of those it sees now. Only a fallback for a missing or skewed
  // finishedAt: after an operator restart the wait starts over, still bounded.
  FirstSeen FirstSeenOf(const std::vector<ObservedPod>& pods, Clock::time_point now);
  void RememberFirstSeen(const std::vector<std::string>& uids, Clock::time_point now);

  ReconcilerOptions o_;
  std::mutex expect_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> expected_;  // "ns/name kind" → created at
  std::mutex seen_mu_;
  std::map<std::string, Clock::time_point> first_seen_;
  std::mutex progress_mu_;
  std::map<std::string, KnownProgress> progress_;
};

}  // namespace hypertrain::controller
