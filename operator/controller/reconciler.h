// The TrainingJob reconciler: level-triggered and idempotent. Each call looks
// at the cached job and its pods and moves the world one step toward the spec:
//
//   invalid spec (api::ParseSpec)      → Failed/InvalidSpec, nothing created
//   finished                           → cleanPodPolicy, then TTL deletion
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
//   otherwise                          → Service, ConfigMap, missing pods; Running
//                                        once every pod runs
//
// Objects have deterministic names, so a crash between steps or a second
// reconcile of a stale cache creates no duplicates (AlreadyExists is success).
// Status is written only through /status, only when it changed, with the
// cached resourceVersion (a stale cache gets 409 and is retried), and before
// any destructive step, so a fault is counted once. Pods are created only after
// a fresh GET shows the cache is current. Events are emitted after the status
// write that recorded the transition.
#ifndef HYPERTRAIN_OPERATOR_CONTROLLER_RECONCILER_H_
#define HYPERTRAIN_OPERATOR_CONTROLLER_RECONCILER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kube/status.h"
#include "kube/resources.h"
#include "kube/store.h"

namespace hypertrain::controller {

// The TrainingJob resource type for the kube client.
kube::ResourceType TrainingJobType();

// Counters the operator exports as Prometheus metrics.
struct ReconcilerCounters {
  std::atomic<int64_t> jobs_created{0};
  std::atomic<int64_t> jobs_succeeded{0};
  std::atomic<int64_t> jobs_failed{0};
  std::atomic<int64_t> jobs_restarted{0};
  std::atomic<int64_t> pods_created{0};
  std::atomic<int64_t> api_errors{0};
};

struct ReconcilerOptions {
  std::shared_ptr<kube::RestClient> client;
  const kube::Store* jobs = nullptr;  // TrainingJob informer cache
  const kube::Store* pods = nullptr;  // Pod informer cache (owner-uid index)
  // Node informer cache (keys are node names); null disables node-health checks.
  const kube::Store* nodes = nullptr;
  std::function<std::chrono::system_clock::time_point()> now = [] {
    return std::chrono::system_clock::now();
  };
  // When the only failed pods of a gang exited 200/201 (a peer's failure seen
  // by its collectives) while other pods still run, the root cause's own
  // status (e.g. 137 from another node) may just not have arrived yet: wait
  // this long after the earliest such exit (container finishedAt; the time
  // this process first saw it when that is missing or in the future) before
  // blaming a follow-on pod. 0 disables the wait.
  std::chrono::milliseconds fault_settle_window{5000};
  std::string instance = "hypertrain-operator";  // Event reportingInstance
  std::function<void(const std::string&)> log = [](const std::string&) {};
  ReconcilerCounters* counters = nullptr;  // optional
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
  struct Ctx;
  StatusOr<ReconcileResult> ReconcileJob(Ctx& c);
  StatusOr<bool> WriteStatus(Ctx& c);
  Status DeletePods(Ctx& c, const std::function<bool(const kube::Json&)>& which);
  Status EnsureObject(const kube::ResourceClient& client, const kube::Json& obj);
  void Emit(Ctx& c);
  std::string Now() const;
  Status Count(Status e);
  // When this reconciler first saw the failed pod `uid` (recorded on first
  // call); old entries are dropped. Only a fallback for a missing or skewed
  // finishedAt: after an operator restart the wait starts over, still bounded.
  std::chrono::system_clock::time_point FirstSeen(const std::string& uid, std::chrono::system_clock::time_point now);

  ReconcilerOptions o_;
  std::mutex seen_mu_;
  std::map<std::string, std::chrono::system_clock::time_point> first_seen_;
};

// RFC 3339 (UTC, seconds) and back; ParseTime returns nullopt on bad input.
std::string FormatTime(std::chrono::system_clock::time_point t);
std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& s);

}  // namespace hypertrain::controller

#endif  // HYPERTRAIN_OPERATOR_CONTROLLER_RECONCILER_H_
