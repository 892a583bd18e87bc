// DecideActFailure (plan.h): what follows when the API server refused an
// object a pass created.
#include <algorithm>

#include "core/time.h"
#include "operator/controller/plan.h"
#include "operator/controller/plan_pass.h"

namespace hypertrain::controller {
namespace {

using std::chrono::milliseconds;

bool OfAttempt(const ObservedPod& pod, int attempt) { return pod.restart_attempt == attempt && !pod.deleting; }

}  // namespace

std::optional<Plan> DecideActFailure(const Observed& in, const Plan& plan, size_t failed, const Status& error,
                                     Clock::time_point now, const ObservedObject* existing) {
  if (failed >= plan.actions.size()) return std::nullopt;
  const Action& a = plan.actions[failed];
  if (a.kind == Action::Kind::kDeletePod || a.kind == Action::Kind::kDeleteJob ||
      a.kind == Action::Kind::kRepairConfigMap) {
    return std::nullopt;
  }
  const int http = error.http_status();
  const bool invalid = http == 400 || http == 422;
  const bool refused = http == 403 || http == 404;
  const bool not_ours = http == 409 && existing != nullptr;
  if (!invalid && !refused && !not_ours) return std::nullopt;

  const api::TrainingJobStatus& before = plan.status ? *plan.status : in.status;
  const std::string now_str = FormatRfc3339(now);
  const char* reason = !not_ours ? api::reason::kPodCreationFailed
                       : OwnershipOf(*existing, in.job.name, in.job.uid) == Ownership::kEarlierJob
                           ? api::reason::kPreviousJobTerminating
                           : api::reason::kOwnershipConflict;
  const std::string message = not_ours ? ConflictMessage(*existing, in.job)
                                       : "the API server refused to " + Describe(a) + ": " + error.message();
  Plan out;
  out.decision = plan.decision;
  out.status = before;
  api::TrainingJobStatus& next = *out.status;
  // The partial gang goes: pods of this attempt observed, and those this pass made.
  std::vector<std::string> deleted;
  for (const ObservedPod& pod : in.pods) {
    if (!OfAttempt(pod, before.restart_attempt)) continue;
    out.actions.push_back(Action{Action::Kind::kDeletePod, pod.name, pod.uid, nullptr});
    deleted.push_back(pod.name);
  }
  for (size_t i = 0; i < failed; ++i) {
    const Action& made = plan.actions[i];
    if (made.kind != Action::Kind::kCreatePod) continue;
    if (std::find(deleted.begin(), deleted.end(), made.name) != deleted.end()) continue;
    out.actions.push_back(Action{Action::Kind::kDeletePod, made.name, "", nullptr});  // no uid yet: by name
  }
  next.pods = {};
  if (invalid) {
    api::SetJobCondition(&next, api::kCondFailed, true, api::reason::kInvalidSpec, message, now_str,
                         in.job.generation);
    if (next.completion_time.empty()) next.completion_time = now_str;
    out.events = plan_internal::ConditionEvents(before, next);
    return out;
  }
  const api::Condition* was = api::FindCondition(before, api::kCondCreated);  // a Warning per new cause
  const bool new_cause = !was || was->reason != reason || was->message != message;
  api::SetJobConditionFalse(&next, api::kCondCreated, reason, message, now_str, in.job.generation);
  if (api::IsConditionTrue(next, api::kCondRunning)) {  // its pods are going: not running any more
    api::SetJobCondition(&next, api::kCondRunning, false, reason, message, now_str, in.job.generation);
  }
  if (new_cause) out.events.push_back(Event{EventType::kWarning, reason, message});
  // Capped backoff: wait as long as the refusal has lasted, within [min, max].
  const api::Condition* created = api::FindCondition(next, api::kCondCreated);
  const auto since = ParseRfc3339(created ? created->last_transition_time : now_str).value_or(now);
  const auto lasted = std::chrono::duration_cast<milliseconds>(now - since);
  out.requeue_after = std::clamp(lasted, kCreationRetryMin, kCreationRetryMax);
  // Kept until then by every pass (WaitingToRetry), not only the requeue: the
  // rollback's own pod events would otherwise retry at once, again and again.
  next.scheduling.retry_time = FormatRfc3339(now + *out.requeue_after);
  return out;
}

}  // namespace hypertrain::controller
