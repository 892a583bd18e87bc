#pragma once
// The pieces of Decide (plan.cc) shared by the files that implement its rows:
// one pass's state and the helpers several rows use. Private to :plan.

#include <chrono>
#include <string>
#include <vector>

#include "operator/controller/elastic.h"
#include "operator/controller/plan.h"

namespace hypertrain::controller::plan_internal {

// One pass: the input, the spec once it is valid, and the plan being built.
struct Pass {
  const Observed& in;
  const api::TrainingJobSpec* spec = nullptr;
  Clock::time_point now;
  std::string now_str;
  DecideOptions opts;
  Plan plan;
  std::vector<Event> extra_events;  // follow the condition events
  Status error;

  api::TrainingJobStatus& status() { return *plan.status; }
  const api::TrainingJobSpec& s() const { return *spec; }
  // The current attempt's size: spec.nodes, or the size an elastic job runs on.
  int nodes() { return status().current_nodes; }
  void SetCondition(const char* type, bool value, const std::string& reason, const std::string& message) {
    api::SetJobCondition(&status(), type, value, reason, message, now_str, in.job.generation);
  }
  void RequeueAtMost(std::chrono::milliseconds d) {
    if (!plan.requeue_after || d < *plan.requeue_after) plan.requeue_after = d;
  }
};

void Finish(Pass& p, const char* type, const char* reason, const std::string& message);

// Deletes the job's pods (any attempt) that `which` selects, except those
// already being deleted.
template <typename Pred>
inline void DeletePods(Pass& p, Pred which) {
  for (const ObservedPod& pod : p.in.pods) {
    if (pod.deleting || !which(pod)) continue;
    p.plan.actions.push_back(Action{Action::Kind::kDeletePod, pod.name, pod.uid, nullptr});
  }
}
void DeleteAllPods(Pass& p);

// The next attempt of the gang: its pods are created once the current ones are
// gone; its scheduling clock starts over.
void NewAttempt(Pass& p);

// One event per condition that became True (or Suspended that became False).
std::vector<Event> ConditionEvents(const api::TrainingJobStatus& before, const api::TrainingJobStatus& after);

// Rows about capacity (plan_capacity.cc): the scheduling timeout and its
// backoff, and the elastic resizes.

// Row "a gang not all Running within runPolicy.schedulingTimeoutSeconds": torn
// down (its pods deleted: no partial gang holds GPUs), then created again after
// a backoff while schedulingRetry lasts, else Failed/Unschedulable. The clock
// starts when every pod exists and none is gated (Kueue has admitted it).
// True when it decided the pass.
bool SchedulingTimedOut(Pass& p, const Gang& gang);

// Row "a torn-down gang in its backoff": nothing is created before
// status.scheduling.retryTime. True while waiting.
bool WaitingToRetry(Pass& p);

// Elastic: the size of the next attempt is recorded, currentNodes follows; the
// Restarting condition says why (`restarting`), else one Resized event does.
void Resize(Pass& p, const SizeChoice& choice, bool restarting);

// Row "a gang restart of an elastic job below maxNodes": the restart is a
// resize point, so the next attempt takes whatever capacity allows now (no
// minResizeIntervalSeconds: the gang restarts anyway).
void GrowAtRestart(Pass& p);

// Row "an elastic job running below maxNodes": when the nodes able to host a
// pod allow a larger size and minResizeIntervalSeconds has passed since the
// last resize, the gang restarts on it (the pods get SIGTERM and save a
// checkpoint first). Capacity is looked at again every checkIntervalSeconds
// (and on node changes). True when it resized.
bool GrowWhenCapacityReturns(Pass& p);

// Rows about the objects under the job's names (plan_ownership.cc).

// Row "excluded namespace": Created=False/NamespaceExcluded, a Warning once;
// nothing is created or deleted.
void Excluded(Pass& p);

// Drops the creates of objects the job already controls (the caches hold
// them). When one of the others is not the job's (kForeign) or is a deleted
// namesake's (kEarlierJob), the pass creates nothing: the status goes back to
// `before` (and the events to the first `events_before`), Created=False says
// which object (OwnershipConflict, a Warning when the cause is new, or
// PreviousJobTerminating) and the pass looks again later. True then.
bool OwnershipBlocks(Pass& p, const api::TrainingJobStatus& before, size_t events_before);

// The progress ConfigMap, when it is the job's (by controller reference or
// Observed::progress_known_ours) but its metadata is not the operator's any
// more (no controller reference, finalizers, labels gone): first action a
// kRepairConfigMap, whatever else the pass decides.
void RepairProgress(Pass& p);

// status.currentNodes: spec.nodes; an elastic job keeps the size it runs on
// while that is one of its sizes.
void SetCurrentNodes(Pass& p);

}  // namespace hypertrain::controller::plan_internal
