// Decide, one table row per case of the reconciler's table (reconciler.h), on
// plain structs: no server, no clock. Each row starts from a running two-node
// job (pods j-node-0 on node-a and j-node-1 on node-b, both healthy), changes
// what the case needs, and states the decision, the job state, the actions in
// order, the events and the requeue; `check` looks at the rest.
#include "operator/controller/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "core/time.h"

namespace hypertrain::controller {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr char kConfig[] = "trainer:\n  max_steps: 50\nmodel:\n  sharding_strategy: hybrid_shard\n";
constexpr char kT0[] = "2027-01-15T08:00:00Z";  // the job's start
const Clock::time_point t0 = *ParseRfc3339(kT0);

std::string At(Clock::duration d) { return FormatRfc3339(t0 + d); }

api::ObjectMeta JobMeta() {
  api::ObjectMeta m;
  m.name = "j";
  m.namespace_ = "ns";
  m.uid = "job-uid";
  m.resource_version = "10";
  m.generation = 3;
  return m;
}

api::TrainingJobSpec ParsedSpec(const nlohmann::json& j) {
  auto spec = api::ParseSpec(j, JobMeta());
  EXPECT_TRUE(spec.ok());
  return spec.ok() ? *spec : api::TrainingJobSpec{};
}

nlohmann::json SpecJson() {
  return {{"image", "hypertrain:test"}, {"nodes", 2}, {"nprocPerNode", 2}, {"trainerConfig", {{"inline", kConfig}}}};
}

ObservedPod Pod(int rank, const std::string& phase = "Running", int attempt = 0) {
  ObservedPod p;
  p.name = "j-node-" + std::to_string(rank);
  p.uid = p.name + "-a" + std::to_string(attempt);
  p.node_rank = rank;
  p.restart_attempt = attempt;
  p.phase = phase;
  p.node_name = rank == 0 ? "node-a" : "node-b";
  return p;
}

void Fail(ObservedPod& p, int exit_code, const std::string& finished_at = "", const std::string& message = "") {
  p.phase = "Failed";
  p.fault.exit_code = exit_code;
  p.fault.finished_at = finished_at;
  p.fault.message = message;
}

ObservedNode Node(const std::string& name, const std::string& health = "Schedulable") {
  ObservedNode n;
  n.name = name;
  n.labels[api::kHyperPodHealthLabel] = health;
  return n;
}

// One pass's input: a running two-node job a minute after its start.
struct Input {
  Observed in;
  api::TrainingJobSpec spec = ParsedSpec(SpecJson());
  std::optional<Status> spec_error;
  Clock::time_point now = t0 + 60s;
  DecideOptions opts;

  Input() {
    in.job = JobMeta();
    api::TrainingJobStatus& s = in.status;
    api::SetJobCondition(&s, api::kCondCreated, true, api::reason::kJobCreated, "created", kT0, 3);
    api::SetJobCondition(&s, api::kCondRunning, true, api::reason::kPodsRunning, "all 2 pods are running", kT0, 3);
    s.observed_generation = 3;
    s.start_time = kT0;
    s.world_size = 4;
    s.pods.active = 2;
    in.pods = {Pod(0), Pod(1)};
    in.nodes = std::map<std::string, ObservedNode>{{"node-a", Node("node-a")}, {"node-b", Node("node-b")}};
  }
  ObservedPod& pod(int i) { return in.pods[i]; }
  Plan Decide() const {
    auto plan = controller::Decide(in, spec_error ? StatusOr<api::TrainingJobSpec>(*spec_error) : spec, now, opts);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? *plan : Plan{};
  }
};

struct Row {
  std::string name;
  std::function<void(Input&)> setup;
  Case decision;
  std::string state;                 // status.state after the pass ("" with no status)
  std::vector<std::string> actions;  // Describe() of each action, in order
  std::vector<std::string> events;   // reasons, in order
  std::optional<milliseconds> requeue;
  std::function<void(const Plan&, const Input&)> check = nullptr;
};

const api::Condition& Cond(const Plan& plan, const char* type) {
  static const api::Condition kNone;
  const api::Condition* c = api::FindCondition(*plan.status, type);
  return c ? *c : kNone;
}

const std::vector<std::string> kEnsure = {"create Service j", "create ConfigMap j-config"};
std::vector<std::string> Ensure(std::vector<std::string> more) {
  std::vector<std::string> out = kEnsure;
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

std::vector<Row> SpecRows() {
  return {
      {"InvalidSpecFailsAndCreatesNothing",
       [](Input& t) {
         t.in.status = {};
         t.in.pods.clear();
         t.spec_error = InvalidArgument("spec.trainerConfig.inline: model.shard_degree: must divide 4");
       },
       Case::kInvalidSpec, "Failed", {}, {"InvalidSpec"}, std::nullopt,
       [](const Plan& p, const Input& t) {
         EXPECT_EQ(Cond(p, api::kCondFailed).message, "spec.trainerConfig.inline: model.shard_degree: must divide 4");
         EXPECT_EQ(p.status->completion_time, At(60s));
         EXPECT_EQ(p.status->observed_generation, 3);
         EXPECT_EQ(p.events[0].type, EventType::kWarning);
       }},
      {"BeingDeletedIsLeftToTheGarbageCollector",
       [](Input& t) { t.in.job.deletion_timestamp = At(30s); },
       Case::kIgnored, "", {}, {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_FALSE(p.status); }},
  };
}

std::vector<Row> FinishedRows() {
  auto failed = [](Input& t) {
    api::SetJobCondition(&t.in.status, api::kCondFailed, true, api::reason::kPodFailed, "x", At(10s), 3);
    t.in.status.completion_time = At(10s);
    Fail(t.pod(1), 137);
  };
  return {
      {"FinishedCleanPodPolicyRunningDeletesRunningPods", failed, Case::kFinished, "Failed", {"delete Pod j-node-0"}, {},
       std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.actions[0].uid, "j-node-0-a0") << "uid precondition"; }},
      {"FinishedCleanPodPolicyAllSkipsPodsBeingDeleted",
       [=](Input& t) {
         failed(t);
         t.spec.run_policy.clean_pod_policy = api::CleanPodPolicy::kAll;
         t.pod(0).deleting = true;
       },
       Case::kFinished, "Failed", {"delete Pod j-node-1"}, {}, std::nullopt},
      {"FinishedCleanPodPolicyNoneKeepsPods",
       [=](Input& t) {
         failed(t);
         t.spec.run_policy.clean_pod_policy = api::CleanPodPolicy::kNone;
       },
       Case::kFinished, "Failed", {}, {}, std::nullopt},
      {"FinishedWaitsForTheTtl",
       [=](Input& t) {
         failed(t);
         t.spec.run_policy.ttl_seconds_after_finished = 30;
         t.now = t0 + 25s;
       },
       Case::kFinished, "Failed", {"delete Pod j-node-0"}, {}, milliseconds(15s)},
      {"FinishedPastTheTtlDeletesTheJob",
       [=](Input& t) {
         failed(t);
         t.spec.run_policy.ttl_seconds_after_finished = 30;
         t.now = t0 + 40s;
       },
       Case::kFinished, "Failed", {"delete Pod j-node-0", "delete TrainingJob j"}, {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.actions[1].uid, "job-uid"); }},
      {"DeadlineNotReachedRequeuesForIt",
       [](Input& t) { t.spec.run_policy.active_deadline_seconds = 90; },
       Case::kRunning, "Running", kEnsure, {}, milliseconds(30s)},
      {"DeadlinePassedFailsAndCleansUp",
       [](Input& t) { t.spec.run_policy.active_deadline_seconds = 60; },
       Case::kDeadlineExceeded, "Failed", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"DeadlineExceeded"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(Cond(p, api::kCondFailed).message, "the job ran past activeDeadlineSeconds=60");
         EXPECT_EQ(Cond(p, api::kCondRunning).status, "False");
       }},
      {"DeadlineCountsOnlyFromTheFirstStart",
       [](Input& t) {
         t.spec.run_policy.active_deadline_seconds = 1;
         t.in.status = {};
         t.in.pods.clear();
       },
       Case::kCreating, "Created", Ensure({"create Pod j-node-0", "create Pod j-node-1"}), {"JobCreated"},
       std::nullopt},
  };
}

std::vector<Row> SuspendRows() {
  return {
      {"SuspendDeletesPodsAndKeepsStatus",
       [](Input& t) { t.spec.run_policy.suspend = true; },
       Case::kSuspended, "Suspended", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"JobSuspended"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->pods, api::PodCounts{});
         EXPECT_EQ(p.status->start_time, kT0);
       }},
      {"ResumeRecreatesThePods",
       [](Input& t) {
         api::SetJobCondition(&t.in.status, api::kCondSuspended, true, api::reason::kJobSuspended, "s", At(5s), 3);
         t.in.pods.clear();
       },
       Case::kCreating, "Created", Ensure({"create Pod j-node-0", "create Pod j-node-1"}), {"JobResumed"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(Cond(p, api::kCondSuspended).status, "False");
         EXPECT_TRUE(p.needs_current_cache);
       }},
      {"StalePodsOfAnOlderAttemptAreDeletedFirst",
       [](Input& t) {
         t.in.status.restart_attempt = 1;
         t.in.pods = {Pod(0, "Running", 1), Pod(1, "Failed", 0), Pod(5, "Running", 1)};
       },
       Case::kStalePods, "Running", {"delete Pod j-node-1", "delete Pod j-node-5"}, {}, milliseconds(1s),
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->pods, (api::PodCounts{1, 0, 0}));
       }},
      {"StalePodsBeingDeletedAreWaitedFor",
       [](Input& t) {
         t.in.status.restart_attempt = 1;
         t.in.pods = {Pod(0, "Running", 0)};
         t.in.pods[0].deleting = true;
       },
       Case::kStalePods, "Running", {}, {}, milliseconds(1s)},
  };
}

std::vector<Row> FailedPodRows() {
  return {
      {"NonRetryableExitCodeFailsAtOnce",
       [](Input& t) { Fail(t.pod(1), 2, "", "model.hidden_size: must be > 0"); },
       Case::kFault, "Failed", {"delete Pod j-node-0"}, {"NonRetryableExitCode"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(Cond(p, api::kCondFailed).message,
                   "pod j-node-1 (node rank 1, node node-b) exited with code 2: model.hidden_size: must be > 0");
         EXPECT_EQ(p.status->restart_count, 0);
         EXPECT_EQ(p.status->completion_time, At(60s));
       }},
      {"FailedPodWithBudgetRestartsTheGang",
       [](Input& t) { Fail(t.pod(1), 137, "", "OOMKilled"); },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->restart_count, 1);
         EXPECT_EQ(p.status->restart_attempt, 1);
         const api::Fault want{api::reason::kPodFailed,
                               "pod j-node-1 (node rank 1, node node-b) exited with code 137: OOMKilled",
                               "j-node-1", "node-b", 1, 137, At(60s)};
         EXPECT_EQ(*p.status->last_fault, want);
         EXPECT_EQ(p.status->node_faults, (std::map<std::string, int32_t>{{"node-b", 1}}));
         EXPECT_TRUE(p.status->excluded_nodes.empty()) << "maxRepeatOffenders is 2";
         EXPECT_EQ(Cond(p, api::kCondRestarting).message, "gang restart 1 after " + want.message);
         EXPECT_EQ(p.status->pods, (api::PodCounts{1, 0, 1}));
       }},
      {"RestartWhileRestartingStillEmitsOneEvent",
       [](Input& t) {
         api::SetJobCondition(&t.in.status, api::kCondRestarting, true, api::reason::kPodFailed, "r", At(1s), 3);
         t.in.status.restart_count = t.in.status.restart_attempt = 1;
         t.in.pods = {Pod(0, "Pending", 1), Pod(1, "Failed", 1)};
         Fail(t.pod(1), 137);
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.events[0].message.rfind("gang restart 2 after pod j-node-1", 0), 0u); }},
      {"BudgetExhaustedFails",
       [](Input& t) {
         t.spec.run_policy.backoff_limit = 1;
         t.in.status.restart_count = 1;
         Fail(t.pod(1), 137);
       },
       Case::kFault, "Failed", {"delete Pod j-node-0"}, {"BackoffLimitExceeded"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_THAT(Cond(p, api::kCondFailed).message,
                     HasSubstr("restart budget backoffLimit=1 exhausted; last fault: pod j-node-1"));
         EXPECT_EQ(p.status->restart_count, 1);
       }},
      {"EvictedPodIsAFaultOfItsOwn",
       [](Input& t) {
         t.pod(0).phase = "Failed";
         t.pod(0).fault = PodFault{api::reason::kPodEvicted, "The node was low on memory.", std::nullopt, ""};
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodEvicted"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->message, "pod j-node-0 (node rank 0, node node-a) failed: The node was low on memory.");
         EXPECT_FALSE(p.status->last_fault->exit_code);
       }},
      {"RepeatOffenderNodeIsExcluded",
       [](Input& t) {
         t.in.status.node_faults["node-b"] = 1;
         Fail(t.pod(1), 137);
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed", "NodeFault"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->excluded_nodes, std::vector<std::string>{"node-b"});
         EXPECT_EQ(p.events[1].message, "node node-b caused 2 faults; excluded from later attempts");
       }},
      {"UnscheduledFailedPodBlamesNoNode",
       [](Input& t) {
         t.pod(1).node_name = "";
         Fail(t.pod(1), 137);
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_TRUE(p.status->node_faults.empty());
         EXPECT_EQ(p.status->last_fault->message, "pod j-node-1 (node rank 1) exited with code 137");
       }},
  };
}

std::vector<Row> SettleRows() {
  return {
      {"FollowOnExitWaitsForTheRootCause",
       [](Input& t) { Fail(t.pod(0), 200, At(60s)); },
       Case::kSettling, "Running", {}, {}, milliseconds(5s),
       [](const Plan& p, const Input&) {
         EXPECT_FALSE(p.status->last_fault);
         EXPECT_EQ(p.status->pods, (api::PodCounts{1, 0, 1}));
         EXPECT_EQ(p.first_seen, std::vector<std::string>{"j-node-0-a0"});
         ASSERT_EQ(p.log.size(), 1u);
         EXPECT_THAT(p.log[0], HasSubstr("pod j-node-0 exited 200 (a peer's failure); waiting 5000 ms"));
       }},
      {"SettleWindowCountsFromFinishedAt",
       [](Input& t) { Fail(t.pod(0), 201, At(57s)); },
       Case::kSettling, "Running", {}, {}, milliseconds(2s)},
      {"SettleWindowFallsBackToFirstSeen",
       [](Input& t) {
         Fail(t.pod(0), 200);  // no finishedAt
         t.in.first_seen["j-node-0-a0"] = t0 + 56s;
       },
       Case::kSettling, "Running", {}, {}, milliseconds(1s)},
      {"FirstSeenBoundsAFinishedAtFromTheFuture",
       [](Input& t) {
         Fail(t.pod(0), 200, At(600s));
         t.in.first_seen["j-node-0-a0"] = t0 + 58s;
       },
       Case::kSettling, "Running", {}, {}, milliseconds(3s)},
      {"SettleWindowKeepsAnEarlierRequeue",
       [](Input& t) {
         Fail(t.pod(0), 200, At(60s));
         t.spec.run_policy.active_deadline_seconds = 62;
       },
       Case::kSettling, "Running", {}, {}, milliseconds(2s)},
      {"SettleWindowExpiredBlamesTheFollowOnPod",
       [](Input& t) { Fail(t.pod(0), 200, At(55s)); },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->rank, 0);
         EXPECT_EQ(p.status->last_fault->exit_code, 200);
       }},
      {"RootCauseOutranksAnEarlierFollowOnExit",
       [](Input& t) {
         Fail(t.pod(0), 200, At(50s));
         Fail(t.pod(1), 137, At(59s));
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->rank, 1);
         EXPECT_EQ(p.status->node_faults, (std::map<std::string, int32_t>{{"node-b", 1}}));
       }},
      {"NodeFaultWhileWaitingActsAtOnce",
       [](Input& t) {
         Fail(t.pod(0), 201, At(60s));
         t.in.nodes->erase("node-b");
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodLost"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->message, "pod j-node-1 (node rank 1, node node-b): the node is gone");
         EXPECT_EQ(p.status->last_fault->rank, 1);
       }},
      {"NoPeerRunningNoWait",
       [](Input& t) {
         Fail(t.pod(0), 200, At(58s));
         Fail(t.pod(1), 201, At(59s));
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->rank, 1) << "201 ranks before 200";
         EXPECT_TRUE(p.first_seen.empty());
       }},
      {"SettleWindowZeroNeverWaits",
       [](Input& t) {
         Fail(t.pod(0), 200, At(60s));
         t.opts.fault_settle_window = 0ms;
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt},
  };
}

std::vector<Row> NodeRows() {
  return {
      {"UnhealthyNodeRestartsTheGang",
       [](Input& t) { (*t.in.nodes)["node-b"] = Node("node-b", "UnschedulablePendingReplacement"); },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"NodeUnhealthy"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->message,
                   "pod j-node-1 (node rank 1, node node-b): node label "
                   "sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement");
         EXPECT_EQ(p.status->last_fault->node, "node-b");
         EXPECT_FALSE(p.status->last_fault->exit_code);
       }},
      {"NodeWithoutHealthLabel",
       [](Input& t) { (*t.in.nodes)["node-a"].labels.clear(); },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"NodeUnhealthy"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_THAT(p.status->last_fault->message, HasSubstr("=<none>")); }},
      {"NoHealthyValuesNoHealthCheck",
       [](Input& t) {
         t.spec.fault_policy.healthy_node_values.clear();
         (*t.in.nodes)["node-b"].labels.clear();
       },
       Case::kRunning, "Running", kEnsure, {}, std::nullopt},
      {"GoneNodeMeansThePodIsLost",
       [](Input& t) { t.in.nodes->erase("node-a"); },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodLost"}, std::nullopt},
      {"NotReadyWithinTheGraceRequeuesForItsEnd",
       [](Input& t) { (*t.in.nodes)["node-b"].not_ready_since = At(0s); },
       Case::kRunning, "Running", kEnsure, {}, milliseconds(240s)},
      {"NotReadyPastTheGraceMeansThePodIsLost",
       [](Input& t) {
         (*t.in.nodes)["node-b"].not_ready_since = At(-240s);
         t.spec.fault_policy.max_repeat_offenders = 1;
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodLost", "NodeFault"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->message,
                   "pod j-node-1 (node rank 1, node node-b): node NotReady for podPendingOrLostGraceSeconds=300");
         EXPECT_EQ(p.status->excluded_nodes, std::vector<std::string>{"node-b"});
       }},
      {"TerminatedOrUnscheduledPodsNeedNoNode",
       [](Input& t) {
         t.pod(0).phase = "Succeeded";
         t.pod(1).phase = "Pending";
         t.pod(1).node_name = "";
         t.in.nodes->clear();
       },
       Case::kRunning, "Running", kEnsure, {}, std::nullopt},
      {"NodeChecksOff",
       [](Input& t) { t.in.nodes.reset(); },
       Case::kRunning, "Running", kEnsure, {}, std::nullopt},
  };
}

std::vector<Row> RunRows() {
  return {
      {"AllPodsExitedZeroSucceeds",
       [](Input& t) {
         t.pod(0).phase = t.pod(1).phase = "Succeeded";
         t.spec.run_policy.ttl_seconds_after_finished = 30;
       },
       Case::kSucceeded, "Succeeded", {}, {"AllPodsSucceeded"}, milliseconds(30s),
       [](const Plan& p, const Input&) {
         EXPECT_EQ(Cond(p, api::kCondSucceeded).message, "all 2 pods exited 0");
         EXPECT_EQ(Cond(p, api::kCondRunning).status, "False");
         EXPECT_EQ(p.status->completion_time, At(60s));
       }},
      {"NewJobCreatesServiceConfigMapAndPods",
       [](Input& t) {
         t.in.status = {};
         t.in.pods.clear();
       },
       Case::kCreating, "Created", Ensure({"create Pod j-node-0", "create Pod j-node-1"}), {"JobCreated"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_TRUE(p.needs_current_cache);
         EXPECT_EQ(p.status->start_time, At(60s));
         EXPECT_EQ(p.status->pods.active, 2);
         EXPECT_EQ(p.status->world_size, 4);
         EXPECT_EQ(Cond(p, api::kCondCreated).message, "created the headless Service and 2 pods");
         EXPECT_EQ(p.actions[0].object["spec"]["clusterIP"], "None");
         EXPECT_EQ(p.actions[1].object["data"]["config.yaml"], kConfig);
         EXPECT_EQ(p.actions[3].object["metadata"]["labels"][api::kLabelNodeRank], "1");
       }},
      {"OnlyMissingPodsAreCreated",
       [](Input& t) {
         t.in.status.restart_attempt = 2;
         t.in.status.excluded_nodes = {"node-x"};
         t.in.pods = {Pod(1, "Running", 2)};
       },
       Case::kCreating, "Running", Ensure({"create Pod j-node-0"}), {}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->start_time, kT0) << "kept";
         const nlohmann::json& pod = p.actions[2].object;
         EXPECT_EQ(pod["metadata"]["labels"][api::kLabelRestartAttempt], "2");
         EXPECT_THAT(pod["spec"]["affinity"].dump(), HasSubstr("node-x"));
       }},
      {"ConfigMapReferenceCreatesNoConfigMap",
       [](Input& t) {
         nlohmann::json j = SpecJson();
         j["trainerConfig"] = {{"configMapRef", {{"name", "mine"}}}};
         t.spec = ParsedSpec(j);
         t.in.pods.clear();
       },
       Case::kCreating, "Running", {"create Service j", "create Pod j-node-0", "create Pod j-node-1"}, {},
       std::nullopt},
      {"AllPodsRunningIsRunning",
       [](Input& t) {
         t.in.status.conditions.pop_back();
         t.in.status.state = "Created";
       },
       Case::kRunning, "Running", kEnsure, {"PodsRunning"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_FALSE(p.needs_current_cache); }},
      {"APendingPodIsNotRunningYet",
       [](Input& t) {
         t.in.status.conditions.pop_back();
         t.in.status.state = "Created";
         t.pod(1).phase = "Pending";
       },
       Case::kRunning, "Created", kEnsure, {}, std::nullopt},
  };
}

std::vector<Row> ProgressRows() {
  auto progress = [](const std::string& p) { return [p](Input& t) { t.pod(0).progress = p; }; };
  auto hang = [](Input& t) {
    t.spec.fault_policy.hang_timeout_seconds = 600;
    t.spec.fault_policy.startup_timeout_seconds = 900;
  };
  return {
      {"ProgressFromNodeZerosAnnotation", progress(R"({"step": 7, "loss": 3.25})"), Case::kRunning, "Running",
       kEnsure, {}, std::nullopt,
       [](const Plan& p, const Input&) {
         api::Progress want;
         want.step = 7;
         want.max_steps = 50;
         want.loss = 3.25;
         want.updated_at = At(60s);
         EXPECT_EQ(p.status->progress, want);
       }},
      {"SameStepKeepsItsUpdateTime",
       [=](Input& t) {
         progress(R"({"step": 7})")(t);
         t.in.status.progress = api::Progress{7, 50, std::nullopt, std::nullopt, std::nullopt, At(5s)};
       },
       Case::kRunning, "Running", kEnsure, {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->progress->updated_at, At(5s)); }},
      {"ReportedTimeAndMaxStepsWin", progress(R"({"step": 9, "maxSteps": 80, "time": "2027-01-15T08:00:42Z"})"),
       Case::kRunning, "Running", kEnsure, {}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->progress->max_steps, 80);
         EXPECT_EQ(p.status->progress->updated_at, At(42s));
       }},
      {"BadAnnotationIsIgnored", progress("{not json"), Case::kRunning, "Running", kEnsure, {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_FALSE(p.status->progress); }},
      {"HangOffByDefault", [](Input& t) { t.now = t0 + 100h; }, Case::kRunning, "Running", kEnsure, {},
       std::nullopt},
      {"HangStartupAllowanceRequeues",
       [=](Input& t) {
         hang(t);
         t.now = t0 + 800s;
       },
       Case::kRunning, "Running", kEnsure, {}, milliseconds(100s)},
      {"HangStartupTimeoutRestarts",
       [=](Input& t) {
         hang(t);
         t.now = t0 + 900s;
       },
       Case::kFault, "Restarting", Ensure({"delete Pod j-node-0", "delete Pod j-node-1"}), {"Hang"}, std::nullopt,
       [](const Plan& p, const Input&) {
         const api::Fault want{api::reason::kHang,
                               "no progress report within startupTimeoutSeconds=900 of all pods running",
                               "j-node-0", "", std::nullopt, std::nullopt, At(900s)};
         EXPECT_EQ(*p.status->last_fault, want);
         EXPECT_TRUE(p.status->node_faults.empty());
       }},
      {"HangStepProgressRequeuesForTheTimeout",
       [=](Input& t) {
         hang(t);
         progress(R"({"step": 3, "time": "2027-01-15T08:13:20Z"})")(t);  // t0 + 800 s
         t.now = t0 + 1399s;
       },
       Case::kRunning, "Running", kEnsure, {}, milliseconds(1s)},
      {"HangWithoutStepProgressRestarts",
       [=](Input& t) {
         hang(t);
         progress(R"({"step": 3, "time": "2027-01-15T08:13:20Z"})")(t);
         t.now = t0 + 1400s;
       },
       Case::kFault, "Restarting", Ensure({"delete Pod j-node-0", "delete Pod j-node-1"}), {"Hang"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_fault->message, "no step progress for hangTimeoutSeconds=600 (last step 3)");
       }},
      {"ProgressOfAnEarlierAttemptDoesNotCount",
       [=](Input& t) {
         hang(t);
         t.in.status.progress = api::Progress{3, 50, std::nullopt, std::nullopt, std::nullopt, At(-10s)};
         t.now = t0 + 10s;
       },
       Case::kRunning, "Running", kEnsure, {}, milliseconds(890s)},
  };
}

class DecideTable : public ::testing::TestWithParam<Row> {};

TEST_P(DecideTable, Row) {
  const Row& row = GetParam();
  Input t;
  row.setup(t);
  const Plan plan = t.Decide();
  EXPECT_EQ(CaseName(plan.decision), std::string(CaseName(row.decision)));
  EXPECT_EQ(plan.status ? plan.status->state : "", row.state);
  std::vector<std::string> actions, events;
  for (const Action& a : plan.actions) actions.push_back(Describe(a));
  for (const Event& e : plan.events) events.push_back(e.reason);
  EXPECT_EQ(actions, row.actions);
  EXPECT_EQ(events, row.events);
  EXPECT_EQ(plan.requeue_after, row.requeue);
  if (row.check) row.check(plan, t);
}

std::string RowName(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Spec, DecideTable, ::testing::ValuesIn(SpecRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Finished, DecideTable, ::testing::ValuesIn(FinishedRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Suspend, DecideTable, ::testing::ValuesIn(SuspendRows()), RowName);
INSTANTIATE_TEST_SUITE_P(FailedPod, DecideTable, ::testing::ValuesIn(FailedPodRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Settle, DecideTable, ::testing::ValuesIn(SettleRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Node, DecideTable, ::testing::ValuesIn(NodeRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Run, DecideTable, ::testing::ValuesIn(RunRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Progress, DecideTable, ::testing::ValuesIn(ProgressRows()), RowName);

// The plan is a function of its input: the same pass twice gives the same plan,
// and a pass over the status it produced asks for nothing new (level-triggered).
TEST(DecideTest, SecondPassOverItsOwnStatusChangesNothing) {
  Input t;
  t.in.status = {};
  t.in.pods.clear();
  Plan first = t.Decide();
  t.in.status = *first.status;
  for (int rank : {0, 1}) t.in.pods.push_back(Pod(rank, "Pending"));
  Plan second = t.Decide();
  EXPECT_EQ(second.decision, Case::kRunning);
  EXPECT_EQ(second.status, first.status);
  EXPECT_TRUE(second.events.empty());
}

TEST(DecideTest, EventsFollowTheConditionsTheyReport) {
  Input t;
  Fail(t.pod(1), 2, "", "bad config");
  const Plan plan = t.Decide();
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_EQ(plan.events[0].type, EventType::kWarning);
  EXPECT_EQ(plan.events[0].message, Cond(plan, api::kCondFailed).message);
}

TEST(DecideTest, DescribeNamesKindAndObject) {
  EXPECT_EQ(Describe(Action{Action::Kind::kCreateConfigMap, "j-config", "", nullptr}), "create ConfigMap j-config");
  EXPECT_EQ(Describe(Action{Action::Kind::kDeleteJob, "j", "u", nullptr}), "delete TrainingJob j");
}

}  // namespace
}  // namespace hypertrain::controller
