// The rows of Decide (plan.h) about the objects under the job's names: the
// excluded namespace, objects the job does not own, the progress ConfigMap's
// repair. What they share with the other rows is in plan_pass.h.
#include "core/time.h"
#include "operator/controller/plan.h"
#include "operator/controller/plan_pass.h"

namespace hypertrain::controller {

std::string ObjectKey(const std::string& kind, const std::string& name) { return kind + "/" + name; }

namespace plan_internal {
namespace {

using std::chrono::milliseconds;

// A pass blocked by an object it does not own looks again after this long
// (informer events of labelled objects come sooner).
constexpr milliseconds kOwnershipRecheck{30000};
// Objects of a deleted namesake: the garbage collector removes them soon.
constexpr milliseconds kEarlierJobRecheck{1000};

// The kind a create action makes; "" for those not checked (PodGroups: their
// names carry the job's UID, so no object made in advance has one).
const char* CreatedKind(Action::Kind k) {
  switch (k) {
    case Action::Kind::kCreateService: return "Service";
    case Action::Kind::kCreateConfigMap: return "ConfigMap";
    case Action::Kind::kCreateServiceAccount: return "ServiceAccount";
    case Action::Kind::kCreateRole: return "Role";
    case Action::Kind::kCreateRoleBinding: return "RoleBinding";
    case Action::Kind::kCreatePod: return "Pod";
    default: return "";
  }
}

bool IsProgress(const Pass& p, const ObservedObject& o) {
  return o.kind == "ConfigMap" && o.name == ProgressConfigMapName(p.in.job.name);
}

Ownership OwnershipIn(const Pass& p, const ObservedObject& o) {
  if (IsProgress(p, o) && p.in.progress_known_ours) return Ownership::kOurs;
  return OwnershipOf(o, p.in.job.name, p.in.job.uid);
}

}  // namespace
}  // namespace plan_internal

std::string ConflictMessage(const ObservedObject& o, const api::ObjectMeta& job) {
  if (OwnershipOf(o, job.name, job.uid) == Ownership::kEarlierJob) {
    return DescribeOwner(o) + " of an earlier TrainingJob named " + job.name +
           " is still being deleted; this job starts once it is gone";
  }
  return DescribeOwner(o) + " exists and is not controlled by this TrainingJob (uid " + job.uid +
         "): the job uses no object it does not own; delete it, or give the job another name";
}

namespace plan_internal {

void Excluded(Pass& p) {
  p.plan.decision = Case::kExcluded;
  const std::string message = "namespace " + p.in.job.namespace_ +
                              " is excluded by the operator (--exclude-namespaces): nothing of this job is created";
  const api::Condition* was = api::FindCondition(p.status(), api::kCondCreated);
  if (!was || was->reason != api::reason::kNamespaceExcluded) {
    p.extra_events.push_back(Event{EventType::kWarning, api::reason::kNamespaceExcluded, message});
  }
  api::SetJobConditionFalse(&p.status(), api::kCondCreated, api::reason::kNamespaceExcluded, message, p.now_str,
                            p.in.job.generation);
}

bool OwnershipBlocks(Pass& p, const api::TrainingJobStatus& before, size_t events_before) {
  const ObservedObject* conflict = nullptr;
  const ObservedObject* earlier = nullptr;
  std::vector<Action> kept;
  for (Action& a : p.plan.actions) {
    const char* kind = CreatedKind(a.kind);
    auto it = *kind ? p.in.objects.find(ObjectKey(kind, a.name)) : p.in.objects.end();
    if (it == p.in.objects.end()) {
      kept.push_back(std::move(a));
      continue;
    }
    switch (OwnershipIn(p, it->second)) {
      case Ownership::kOurs: break;  // exists: nothing to create
      case Ownership::kEarlierJob: if (!earlier) earlier = &it->second; break;
      case Ownership::kForeign: if (!conflict) conflict = &it->second; break;
    }
  }
  p.plan.actions = std::move(kept);
  if (!conflict && !earlier) return false;
  // Nothing is created: the pass undoes what the creating rows recorded.
  p.status() = before;
  p.extra_events.resize(events_before);
  p.plan.needs_current_cache = false;
  std::vector<Action> rest;
  for (Action& a : p.plan.actions) {
    if (!*CreatedKind(a.kind) && a.kind != Action::Kind::kCreatePodGroup) rest.push_back(std::move(a));
  }
  p.plan.actions = std::move(rest);
  const ObservedObject& o = conflict ? *conflict : *earlier;
  const char* reason = conflict ? api::reason::kOwnershipConflict : api::reason::kPreviousJobTerminating;
  const std::string message = ConflictMessage(o, p.in.job);
  const api::Condition* was = api::FindCondition(p.status(), api::kCondCreated);
  if (conflict && (!was || was->reason != reason || was->message != message)) {
    p.extra_events.push_back(Event{EventType::kWarning, reason, message});
  }
  api::SetJobConditionFalse(&p.status(), api::kCondCreated, reason, message, p.now_str, p.in.job.generation);
  p.plan.decision = conflict ? Case::kOwnershipConflict : Case::kEarlierJob;
  p.RequeueAtMost(conflict ? kOwnershipRecheck : kEarlierJobRecheck);
  return true;
}

void RepairProgress(Pass& p) {
  auto it = p.in.objects.find(ObjectKey("ConfigMap", ProgressConfigMapName(p.in.job.name)));
  if (it == p.in.objects.end() || OwnershipIn(p, it->second) != Ownership::kOurs) return;
  const ObservedObject& cm = it->second;
  const bool intact = cm.controller_uid == p.in.job.uid && cm.finalizers.empty() && cm.job_label == p.in.job.name;
  if (intact) return;
  p.plan.actions.insert(p.plan.actions.begin(), Action{Action::Kind::kRepairConfigMap, cm.name, cm.uid,
                                                       ProgressRepairPatch(p.in.job)});
  p.plan.log.push_back("job " + p.in.job.namespace_ + "/" + p.in.job.name + ": progress ConfigMap " + cm.name +
                       " lost the operator's metadata (controller reference, labels or finalizers); restoring it");
}

}  // namespace plan_internal
}  // namespace hypertrain::controller
