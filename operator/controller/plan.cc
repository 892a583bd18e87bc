// Decide (plan.h): the table of reconciler.h, one function per row. The rows
// about capacity (scheduling timeout, elastic resizes) are in plan_capacity.cc,
// DecideActFailure in plan_act_failure.cc; what they share in plan_pass.h.
#include "operator/controller/plan.h"

#include <algorithm>

#include "contract/progress.h"
#include "core/time.h"
#include "operator/controller/elastic.h"
#include "operator/api/estimate.h"
#include "operator/controller/plan_pass.h"
#include "operator/controller/recovery.h"

namespace hypertrain::controller {
namespace plan_internal {

using nlohmann::json;
using std::chrono::milliseconds;

// Pods of an older attempt: looked at again this long after their deletion.
constexpr milliseconds kStalePodsRequeue{1000};

void Finish(Pass& p, const char* type, const char* reason, const std::string& message) {
  p.SetCondition(type, true, reason, message);
  if (p.status().completion_time.empty()) p.status().completion_time = p.now_str;
}

void DeleteAllPods(Pass& p) {
  DeletePods(p, [](const ObservedPod&) { return true; });
}

// The next attempt of the gang: its pods are created once the current ones are
// gone; its scheduling clock starts over.
void NewAttempt(Pass& p) {
  ++p.status().restart_attempt;
  p.status().scheduling.start_time.clear();
  p.status().scheduling.message.clear();
  // The next attempt reports its own progress (it resumes from a checkpoint,
  // not from the step this one reached): STEP stays empty until it does.
  p.status().progress.reset();
}

// One event per condition that became True (or Suspended that became False).
std::vector<Event> ConditionEvents(const api::TrainingJobStatus& before, const api::TrainingJobStatus& after) {
  std::vector<Event> out;
  for (const api::Condition& cond : after.conditions) {
    const api::Condition* was = api::FindCondition(before, cond.type);
    const bool became_true = cond.status == "True" && (!was || was->status != "True");
    const bool resumed = cond.type == api::kCondSuspended && cond.status == "False" && was && was->status == "True";
    if (!became_true && !resumed) continue;
    const bool warn = cond.type == api::kCondFailed || cond.type == api::kCondRestarting;
    out.push_back(Event{warn ? EventType::kWarning : EventType::kNormal, cond.reason, cond.message});
  }
  return out;
}

namespace {

// cleanPodPolicy of a finished job: None keeps the pods, All deletes them,
// Running deletes those that have not terminated.
void CleanPods(Pass& p) {
  switch (p.s().run_policy.clean_pod_policy) {
    case api::CleanPodPolicy::kNone:
      return;
    case api::CleanPodPolicy::kAll:
      return DeleteAllPods(p);
    case api::CleanPodPolicy::kRunning:
      return DeletePods(p, [](const ObservedPod& pod) { return !pod.Terminated(); });
  }
}

// Row "invalid spec": Failed/InvalidSpec naming the field; nothing is created.
void InvalidSpec(Pass& p, const Status& error) {
  p.plan.decision = Case::kInvalidSpec;
  Finish(p, api::kCondFailed, api::reason::kInvalidSpec, error.message());
}

// Under Kueue a failed job ends its pod group, so Kueue releases the quota that
// the terminated pods kept would otherwise hold: one terminated pod gets
// kueue.x-k8s.io/retriable-in-group "false" (once).
void EndKueueGroup(Pass& p) {
  if (p.s().scheduling.gang.provider != api::GangProvider::kKueue || !api::IsConditionTrue(p.status(), api::kCondFailed)) {
    return;
  }
  const ObservedPod* mark = nullptr;
  for (const ObservedPod& pod : p.in.pods) {
    if (pod.final_in_group) return;
    if (!mark && pod.Terminated() && !pod.deleting) mark = &pod;
  }
  if (!mark) return;  // none left: nothing holds the quota
  p.plan.actions.push_back(Action{Action::Kind::kPatchPod, mark->name, mark->uid,
                                  {{"metadata", {{"annotations", {{gang::kKueueRetriableInGroup, "false"}}}}}}});
}

// Row "finished": cleanPodPolicy, then the job's deletion once
// ttlSecondsAfterFinished has passed since completionTime.
void Finished(Pass& p) {
  p.plan.decision = Case::kFinished;
  EndKueueGroup(p);
  CleanPods(p);
  const auto& ttl = p.s().run_policy.ttl_seconds_after_finished;
  if (!ttl) return;
  const auto done = ParseRfc3339(p.status().completion_time).value_or(p.now);
  const auto expiry = done + std::chrono::seconds(*ttl);
  if (p.now >= expiry) {
    p.plan.actions.push_back(Action{Action::Kind::kDeleteJob, p.in.job.name, p.in.job.uid, nullptr});
  } else {
    p.plan.requeue_after = std::chrono::duration_cast<milliseconds>(expiry - p.now);
  }
}

// Row "estimateOnly on a job that never started": the dry run's estimate in
// status.estimate, condition Estimated (False with the reason when the config
// cannot be estimated); nothing is created until the flag is turned off.
void EstimateOnly(Pass& p) {
  p.plan.decision = Case::kEstimateOnly;
  StatusOr<nlohmann::json> e = api::EstimateJob(p.s());
  if (e.ok()) {
    p.status().estimate = *e;
    p.SetCondition(api::kCondEstimated, true, api::reason::kEstimateReady, (*e)["message"].get<std::string>());
  } else {
    p.status().estimate = nullptr;
    p.SetCondition(api::kCondEstimated, false, api::reason::kEstimateUnavailable, e.status().message());
  }
}

// Row "deadline passed", counted from the first start: true when it decided
// the pass; otherwise the pass looks again at the deadline.
bool DeadlineExceeded(Pass& p) {
  const auto& limit = p.s().run_policy.active_deadline_seconds;
  if (!limit || p.status().start_time.empty()) return false;
  const auto start = ParseRfc3339(p.status().start_time).value_or(p.now);
  const auto deadline = start + std::chrono::seconds(*limit);
  if (p.now < deadline) {
    p.plan.requeue_after = std::chrono::duration_cast<milliseconds>(deadline - p.now);
    return false;
  }
  p.plan.decision = Case::kDeadlineExceeded;
  Finish(p, api::kCondFailed, api::reason::kDeadlineExceeded,
         "the job ran past activeDeadlineSeconds=" + std::to_string(*limit));
  CleanPods(p);
  return true;
}

// Row "suspend": the pods go, the rest of the status stays.
void Suspend(Pass& p) {
  p.plan.decision = Case::kSuspended;
  p.SetCondition(api::kCondSuspended, true, api::reason::kJobSuspended, "the job is suspended: its pods are deleted");
  p.status().pods = {};
  DeleteAllPods(p);
}

void ResumeIfSuspended(Pass& p) {
  if (!api::IsConditionTrue(p.status(), api::kCondSuspended)) return;
  p.SetCondition(api::kCondSuspended, false, api::reason::kJobResumed, "the job is resumed: its pods are recreated");
}

bool OfCurrentAttempt(const ObservedPod& pod, int attempt, int nodes) {
  return pod.restart_attempt == attempt && pod.node_rank >= 0 && pod.node_rank < nodes;
}

// The current attempt's pods by rank (the first of a rank) and their counts in
// status.pods; `stale` tells whether other pods (older attempts) exist.
Gang CurrentGang(Pass& p, bool* stale) {
  Gang gang;
  const int attempt = p.status().restart_attempt;
  for (const ObservedPod& pod : p.in.pods) {
    if (!OfCurrentAttempt(pod, attempt, p.nodes())) {
      *stale = true;
    } else {
      gang.emplace(pod.node_rank, &pod);
    }
  }
  api::PodCounts counts;
  for (const auto& [rank, pod] : gang) {
    if (pod->phase == "Succeeded") {
      ++counts.succeeded;
    } else if (pod->phase == "Failed") {
      ++counts.failed;
    } else {
      ++counts.active;
    }
  }
  p.status().pods = counts;
  return gang;
}

// Row "pods of an older attempt": delete them and wait until they are gone
// (their GPUs and EFA devices must be free before the next attempt starts).
// A pod on a lost node (gone, or NotReady past podPendingOrLostGraceSeconds)
// is deleted with no grace: its kubelet cannot end it, and the next attempt's
// pod of the same name waits for it (kubectl delete --force, done for the user).
void StalePods(Pass& p) {
  p.plan.decision = Case::kStalePods;
  const int attempt = p.status().restart_attempt;
  DeletePods(p, [&](const ObservedPod& pod) { return !OfCurrentAttempt(pod, attempt, p.nodes()); });
  for (const ObservedPod& pod : p.in.pods) {
    if (OfCurrentAttempt(pod, attempt, p.nodes()) || !p.in.nodes || pod.node_name.empty()) continue;
    const auto lost_at = NodeLostAt(pod.node_name, *p.in.nodes, p.s().fault_policy, p.now);
    if (!lost_at || p.now < *lost_at) continue;
    auto a = std::find_if(p.plan.actions.begin(), p.plan.actions.end(), [&](const Action& x) {
      return x.kind == Action::Kind::kDeletePod && x.uid == pod.uid;
    });
    if (a == p.plan.actions.end()) a = p.plan.actions.insert(a, Action{Action::Kind::kDeletePod, pod.name, pod.uid, nullptr});
    a->force = true;
  }
  p.plan.requeue_after = kStalePodsRequeue;
}

// Counts a fault against its node; maxRepeatOffenders faults exclude the node
// from later attempts.
void CountNodeFault(Pass& p, const std::string& node) {
  if (node.empty()) return;
  const int n = ++p.status().node_faults[node];
  const int limit = p.s().fault_policy.max_repeat_offenders;
  auto& excluded = p.status().excluded_nodes;
  if (limit <= 0 || n < limit || std::find(excluded.begin(), excluded.end(), node) != excluded.end()) return;
  excluded.push_back(node);
  p.extra_events.push_back(Event{EventType::kWarning, "NodeFault",
                                 "node " + node + " caused " + std::to_string(n) +
                                     " faults; excluded from later attempts"});
}

// Row "a pod failed" and every other fault: Failed at once for a
// non-retryable exit code, Failed/BackoffLimitExceeded without budget, else a
// gang restart (the next attempt). One budget for every fault path.
void Fault(Pass& p, const DetectedFault& f) {
  p.plan.decision = Case::kFault;
  p.status().last_fault =
      api::Fault{f.reason, f.message, f.pod, f.node, f.rank, f.exit_code, p.now_str, f.finished_at};
  if (CountsAgainstNode(f)) CountNodeFault(p, f.node);
  const int32_t budget = p.s().run_policy.backoff_limit;
  if (f.exit_code && !p.s().fault_policy.Retryable(*f.exit_code)) {
    Finish(p, api::kCondFailed, api::reason::kNonRetryableExitCode, f.message);
  } else if (p.status().restart_count >= budget) {
    Finish(p, api::kCondFailed, api::reason::kBackoffLimitExceeded,
           "restart budget backoffLimit=" + std::to_string(budget) + " exhausted; last fault: " + f.message);
  } else {
    ++p.status().restart_count;
    NewAttempt(p);
    GrowAtRestart(p);
    const std::string msg = "gang restart " + std::to_string(p.status().restart_attempt) + " after " + f.message;
    // Already Restarting (no condition transition): still one event per restart.
    if (api::IsConditionTrue(p.status(), api::kCondRestarting)) {
      p.extra_events.push_back(Event{EventType::kWarning, f.reason, msg});
    }
    p.SetCondition(api::kCondRestarting, true, f.reason, msg);
  }
  if (api::IsFinished(p.status())) {
    CleanPods(p);
  } else {
    DeleteAllPods(p);
  }
}

// Rows "node unhealthy / NotReady past grace / gone": true when a live pod's
// node failed (handled as a fault); otherwise the pass looks again when the
// earliest NotReady grace ends.
bool NodeFault(Pass& p, const Gang& gang) {
  if (!p.in.nodes) return false;
  const NodeCheck check = CheckNodes(gang, *p.in.nodes, p.s().fault_policy, p.now);
  if (check.recheck_after) p.RequeueAtMost(*check.recheck_after);
  if (!check.fault) return false;
  Fault(p, *check.fault);
  return true;
}

// Row "only follow-on exits so far": true while the pass waits for the root
// cause's status (or acted on a running peer's node fault meanwhile).
bool Settling(Pass& p, const Gang& gang, const Culprit& culprit) {
  const Settle settle = SettleWindow(gang, culprit, p.in.first_seen, p.now, p.opts.fault_settle_window);
  p.plan.first_seen = settle.consulted;
  if (!settle.wait_until) return false;
  // A running peer's node fault is a root cause that will not show as an exit.
  if (NodeFault(p, gang)) return true;
  p.plan.decision = Case::kSettling;
  const auto left = std::chrono::ceil<milliseconds>(*settle.wait_until - p.now);
  p.RequeueAtMost(left);
  p.plan.log.push_back("job " + p.in.job.namespace_ + "/" + p.in.job.name + ": pod " + culprit.pod->name + " exited " +
                       std::to_string(culprit.pod->fault.exit_code.value_or(0)) +
                       " (a peer's failure); waiting " + std::to_string(left.count()) +
                       " ms for the root cause's status before restarting");
  return true;
}

// Row "every node's pod exited 0".
void Succeeded(Pass& p) {
  p.plan.decision = Case::kSucceeded;
  Finish(p, api::kCondSucceeded, api::reason::kAllPodsSucceeded,
         "all " + std::to_string(p.nodes()) + " pods exited 0");
  CleanPods(p);
  const auto& ttl = p.s().run_policy.ttl_seconds_after_finished;
  if (ttl) p.plan.requeue_after = std::chrono::seconds(*ttl);
}

// The headless Service, the inline config's ConfigMap and the gang's PodGroup
// (OwnershipBlocks drops those the caches hold as the job's).
void EnsureServiceAndConfig(Pass& p) {
  p.plan.actions.push_back(Action{Action::Kind::kCreateService, ServiceName(p.in.job.name), "",
                                  BuildService(p.in.job, p.s())});
  if (p.s().trainer_config.inline_yaml) {
    auto cm = BuildConfigMap(p.in.job, p.s());
    if (!cm.ok()) {
      p.error = cm.status();
      return;
    }
    p.plan.actions.push_back(Action{Action::Kind::kCreateConfigMap, ConfigMapName(p.in.job.name), "", *cm});
  }
  if (json pg = BuildPodGroup(p.in.job, p.s(), p.nodes()); !pg.is_null()) {
    p.plan.actions.push_back(Action{Action::Kind::kCreatePodGroup, pg["metadata"]["name"].get<std::string>(), "", pg});
  }
}

// Row "otherwise", pods missing: create them (on a current cache only).
void CreatePods(Pass& p, const std::vector<int>& missing) {
  p.plan.decision = Case::kCreating;
  p.plan.needs_current_cache = true;
  // Nothing is reported as created before it exists: Created and the pod
  // counts follow from the pods the next pass observes (the API server may
  // refuse them: DecideActFailure).
  if (p.status().start_time.empty()) {
    // What parsing could not apply (e.g. an instance type not in the table):
    // said once, with the job's first pods.
    for (const std::string& w : p.s().warnings) p.extra_events.push_back(Event{EventType::kWarning, "SpecWarning", w});
  }
  p.status().scheduling.retry_time.clear();
  // The scheduling clock starts with the gang's creation; under Kueue, when the
  // admitted (ungated) gang is first seen (SchedulingTimedOut).
  if (p.s().scheduling.gang.provider != api::GangProvider::kKueue && p.status().scheduling.start_time.empty()) {
    p.status().scheduling.start_time = p.now_str;
  }
  if (p.status().start_time.empty()) p.status().start_time = p.now_str;
  // The pods' identity and the one object it may write, before the pods: the
  // job's own ServiceAccount (unless the spec names one), its progress
  // ConfigMap, and a Role and RoleBinding allowing `patch` on that alone.
  const api::ObjectMeta& job = p.in.job;
  if (p.s().service_account_name.empty()) {
    p.plan.actions.push_back(Action{Action::Kind::kCreateServiceAccount, TrainerServiceAccountName(job.name), "",
                                    BuildTrainerServiceAccount(job)});
  }
  p.plan.actions.push_back(
      Action{Action::Kind::kCreateConfigMap, ProgressConfigMapName(job.name), "", BuildProgressConfigMap(job)});
  p.plan.actions.push_back(
      Action{Action::Kind::kCreateRole, ProgressConfigMapName(job.name), "", BuildProgressRole(job)});
  p.plan.actions.push_back(Action{Action::Kind::kCreateRoleBinding, ProgressConfigMapName(job.name), "",
                                  BuildProgressRoleBinding(job, p.s())});
  PodOptions opts{0, p.status().restart_attempt, p.status().excluded_nodes, p.nodes(), ""};
  if (p.s().elastic) {
    StartSizeHistory(&p.status(), p.nodes(), p.now_str);
    if (p.nodes() != p.s().nodes) opts.resize_reason = p.status().elastic.history.back().reason;
  }
  for (int rank : missing) {
    opts.rank = rank;
    // Checked now, built by the reconciler batch by batch (Action::pod).
    if (Status s = CheckPodOptions(p.s(), opts); !s.ok()) {
      p.error = s;
      return;
    }
    Action create{Action::Kind::kCreatePod, PodName(p.in.job.name, rank), "", nullptr};
    create.pod = opts;
    p.plan.actions.push_back(std::move(create));
  }
}

// status.progress from the annotation node 0's launcher writes on the job's
// progress ConfigMap; maxSteps from the inline config when the report has
// none; updatedAt kept while the step stays the same.
void UpdateProgress(Pass& p, const Gang& gang) {
  if (gang.find(0) == gang.end() || !p.in.progress) return;
  // The ConfigMap outlives the attempts: a report of an earlier attempt is not this one's.
  std::string error;
  const auto report = contract::DecodeProgress(*p.in.progress, &error);
  if (report && report->attempt && *report->attempt != p.status().restart_attempt) return;
  // The first step after a gang restart's resume: the recovery time, once.
  if (report) {
    if (auto r = MeasureRecovery(p.status(), *report)) {
      p.status().last_recovery_seconds = r->seconds;
      p.status().last_recovery_attempt = p.status().restart_attempt;
      p.extra_events.push_back(Event{EventType::kNormal, "Recovered", r->message});
    }
  }
  auto parsed = api::ParseProgressAnnotation(*p.in.progress);
  if (!parsed.ok()) return;
  api::Progress next = *parsed;
  const auto& summary = p.s().trainer_config.summary;
  if (!next.max_steps && summary) next.max_steps = summary->max_steps;
  if (next.updated_at.empty()) {
    const auto& prev = p.status().progress;
    next.updated_at = prev && prev->step == next.step ? prev->updated_at : p.now_str;
  }
  p.status().progress = next;
  if (p.s().elastic) TrackSizeSteps(&p.status(), next);
}

// Row "otherwise", every pod exists: Running once all run, progress, and the
// hang deadline.
void Running(Pass& p, const Gang& gang) {
  p.plan.decision = Case::kRunning;
  if (!api::IsConditionTrue(p.status(), api::kCondCreated)) {
    p.SetCondition(api::kCondCreated, true, api::reason::kJobCreated,
                   "created the headless Service and " + std::to_string(p.nodes()) + " pods");
  }
  const bool all_running =
      std::all_of(gang.begin(), gang.end(), [](const auto& rp) { return rp.second->phase == "Running"; });
  if (all_running) {
    p.SetCondition(api::kCondRunning, true, api::reason::kPodsRunning,
                   "all " + std::to_string(p.nodes()) + " pods are running" +
                       (p.nodes() != p.s().nodes ? " (" + std::to_string(p.s().nodes) + " desired)" : ""));
    p.status().scheduling.message.clear();
  }
  UpdateProgress(p, gang);
  const HangCheck hang = CheckHang(p.in.job.name, p.status(), p.s().fault_policy, all_running, p.now);
  if (hang.fault) return Fault(p, *hang.fault);
  if (hang.recheck_after) p.RequeueAtMost(*hang.recheck_after);
  if (all_running) GrowWhenCapacityReturns(p);
}

// The table of reconciler.h, top to bottom, for a valid spec.
void DecideValid(Pass& p) {
  SetCurrentNodes(p);
  p.status().gpus = p.nodes() * p.s().gpus_per_node;
  p.status().world_size = p.nodes() * p.s().nproc_per_node;
  if (api::IsFinished(p.status())) return Finished(p);
  // Once pods ran, the flag no longer applies (the CRD refuses turning it on).
  if (p.s().estimate_only && p.status().start_time.empty() && p.in.pods.empty()) return EstimateOnly(p);
  if (DeadlineExceeded(p)) return;
  if (p.s().run_policy.suspend) return Suspend(p);
  ResumeIfSuspended(p);
  bool stale = false;
  const Gang gang = CurrentGang(p, &stale);
  if (stale) return StalePods(p);
  if (auto culprit = FindCulprit(gang)) {
    if (Settling(p, gang, *culprit)) return;
    return Fault(p, CulpritFault(*culprit));
  }
  if (NodeFault(p, gang)) return;
  const int nodes = p.nodes();
  if (static_cast<int>(gang.size()) == nodes && p.status().pods.succeeded == nodes) return Succeeded(p);
  std::vector<int> missing;
  for (int rank = 0; rank < nodes; ++rank) {
    if (!gang.count(rank)) missing.push_back(rank);
  }
  if (missing.empty() ? SchedulingTimedOut(p, gang) : WaitingToRetry(p)) return;
  const api::TrainingJobStatus before = p.status();
  const size_t events_before = p.extra_events.size();
  EnsureServiceAndConfig(p);
  if (!missing.empty()) CreatePods(p, missing);
  if (!p.error.ok() || OwnershipBlocks(p, before, events_before) || !missing.empty()) return;
  Running(p, gang);
}

}  // namespace
}  // namespace plan_internal

const char* CaseName(Case c) {
  switch (c) {
    case Case::kIgnored: return "Ignored";
    case Case::kExcluded: return "Excluded";
    case Case::kOwnershipConflict: return "OwnershipConflict";
    case Case::kEarlierJob: return "EarlierJob";
    case Case::kInvalidSpec: return "InvalidSpec";
    case Case::kFinished: return "Finished";
    case Case::kEstimateOnly: return "EstimateOnly";
    case Case::kDeadlineExceeded: return "DeadlineExceeded";
    case Case::kSuspended: return "Suspended";
    case Case::kStalePods: return "StalePods";
    case Case::kFault: return "Fault";
    case Case::kSettling: return "Settling";
    case Case::kSucceeded: return "Succeeded";
    case Case::kSchedulingBackoff: return "SchedulingBackoff";
    case Case::kCreating: return "Creating";
    case Case::kUnschedulable: return "Unschedulable";
    case Case::kRunning: return "Running";
    case Case::kResized: return "Resized";
  }
  return "?";
}

std::string Describe(const Action& a) {
  switch (a.kind) {
    case Action::Kind::kCreateService: return "create Service " + a.name;
    case Action::Kind::kCreateConfigMap: return "create ConfigMap " + a.name;
    case Action::Kind::kCreateServiceAccount: return "create ServiceAccount " + a.name;
    case Action::Kind::kCreateRole: return "create Role " + a.name;
    case Action::Kind::kCreateRoleBinding: return "create RoleBinding " + a.name;
    case Action::Kind::kCreatePodGroup: return "create PodGroup " + a.name;
    case Action::Kind::kCreatePod: return "create Pod " + a.name;
    case Action::Kind::kPatchPod: return "patch Pod " + a.name;
    case Action::Kind::kRepairConfigMap: return "repair ConfigMap " + a.name;
    case Action::Kind::kDeletePod: return (a.force ? "force-delete Pod " : "delete Pod ") + a.name;
    case Action::Kind::kDeleteJob: return "delete TrainingJob " + a.name;
  }
  return "?";
}

StatusOr<nlohmann::json> PodToCreate(const api::ObjectMeta& job, const api::TrainingJobSpec& spec, const Action& a) {
  if (a.kind != Action::Kind::kCreatePod) return Internal("not a pod create: " + Describe(a));
  return BuildPod(job, spec, a.pod);
}

using plan_internal::Pass;

StatusOr<Plan> Decide(const Observed& in, const StatusOr<api::TrainingJobSpec>& spec, Clock::time_point now,
                      const DecideOptions& opts) {
  Pass p{in, nullptr, now, FormatRfc3339(now), opts};
  if (in.job.deletion_timestamp) {  // the GC removes the rest, once nothing holds it
    plan_internal::RepairProgress(p);
    return std::move(p.plan);
  }
  p.plan.status = in.status;
  p.status().observed_generation = in.job.generation;
  if (in.namespace_excluded) {
    plan_internal::Excluded(p);
  } else if (spec.ok()) {
    p.spec = &spec.value();
    plan_internal::DecideValid(p);
  } else {
    plan_internal::InvalidSpec(p, spec.status());
  }
  if (!p.error.ok()) return p.error;
  if (!in.namespace_excluded) plan_internal::RepairProgress(p);
  p.status().state = api::ComputeState(p.status());  // never blank: Pending before anything runs
  p.plan.events = plan_internal::ConditionEvents(in.status, p.status());
  for (Event& e : p.extra_events) p.plan.events.push_back(std::move(e));
  return std::move(p.plan);
}

}  // namespace hypertrain::controller
