// Decide, table-driven, on plain structs (no server, no clock): the rows of
// the reconciler's table (reconciler.h) about the job's life: invalid spec,
// deletion, finished (cleanPodPolicy, TTL), deadline, suspend/resume, stale
// attempts, success, creation, running, progress and hang detection, and the
// dry run (estimateOnly). The
// fault rows are in plan_faults_test.cc; the harness in plan_testing.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/plan.h"
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller {
namespace {

using namespace plantest;  // NOLINT: the table's vocabulary
using ::testing::HasSubstr;

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
       Case::kCreating, "Pending", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {}, std::nullopt},
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
       Case::kCreating, "Created", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {"JobResumed"},
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
      // A stopped kubelet never confirms the end: the pod would stay Terminating
      // and block the next attempt's pod of the same name.
      {"StalePodsOnALostNodeAreForceDeleted",
       [](Input& t) {
         t.in.status.restart_attempt = 1;
         t.in.pods = {Pod(0, "Running", 0), Pod(1, "Running", 0), Pod(0, "Pending", 1)};
         t.in.pods[1].deleting = true;
         (*t.in.nodes)["node-b"].not_ready_since = At(-300s);
       },
       Case::kStalePods, "Running", {"delete Pod j-node-0", "force-delete Pod j-node-1"}, {}, milliseconds(1s)},
      {"StalePodsOnAGoneNodeAreForceDeleted",
       [](Input& t) {
         t.in.status.restart_attempt = 1;
         t.in.pods = {Pod(0, "Running", 0)};
         t.in.nodes->erase("node-a");
       },
       Case::kStalePods, "Running", {"force-delete Pod j-node-0"}, {}, milliseconds(1s)},
      {"StalePodsOnANodeNotReadyWithinTheGraceAreWaitedFor",
       [](Input& t) {
         t.in.status.restart_attempt = 1;
         t.in.pods = {Pod(1, "Running", 0)};
         t.in.pods[0].deleting = true;
         (*t.in.nodes)["node-b"].not_ready_since = At(0s);
       },
       Case::kStalePods, "Running", {}, {}, milliseconds(1s)},
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
       // Nothing is reported as created before it exists (issue 19: refused pods were).
       Case::kCreating, "Pending", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {}, std::nullopt,
       [](const Plan& p, const Input& t) {
         EXPECT_TRUE(p.needs_current_cache);
         EXPECT_EQ(p.status->start_time, At(60s));
         EXPECT_EQ(p.status->pods.active, 0);
         EXPECT_EQ(p.status->world_size, 4);
         EXPECT_EQ(api::FindCondition(*p.status, api::kCondCreated), nullptr);
         EXPECT_EQ(p.actions[0].object["spec"]["clusterIP"], "None");
         EXPECT_EQ(p.actions[1].object["data"]["config.yaml"], kConfig);
         EXPECT_EQ(p.actions[2].object["kind"], "ServiceAccount");
         EXPECT_EQ(p.actions[4].object["rules"][0]["resourceNames"][0], "j-progress");
         EXPECT_EQ(p.actions[5].object["subjects"][0]["name"], "j-trainer");
         EXPECT_EQ(PodOf(p, 7, t)["metadata"]["labels"][api::kLabelNodeRank], "1");
         EXPECT_EQ(PodOf(p, 7, t)["spec"]["serviceAccountName"], "j-trainer");
       }},
      {"OnlyMissingPodsAreCreated",
       [](Input& t) {
         t.in.status.restart_attempt = 2;
         t.in.status.excluded_nodes = {"node-x"};
         t.in.pods = {Pod(1, "Running", 2)};
       },
       Case::kCreating, "Running", EnsureAndCreate({"create Pod j-node-0"}), {}, std::nullopt,
       [](const Plan& p, const Input& t) {
         EXPECT_EQ(p.status->start_time, kT0) << "kept";
         const nlohmann::json pod = PodOf(p, 6, t);
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
       Case::kCreating, "Running", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}, false), {},
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
  // The annotation node 0's launcher writes on the job's progress ConfigMap.
  auto progress = [](const std::string& p) { return [p](Input& t) { t.in.progress = p; }; };
  auto hang = [](Input& t) {
    t.spec.fault_policy.hang_timeout_seconds = 600;
    t.spec.fault_policy.startup_timeout_seconds = 900;
  };
  return {
      {"ProgressFromTheProgressConfigMap", progress(R"({"step": 7, "loss": 3.25})"), Case::kRunning, "Running",
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
      // Issue 34: the first step after a gang restart's resume, reported with
      // its phases, gives lastRecoverySeconds from the failed container's
      // finishedAt, and one Recovered event.
      {"RecoveryFromTheFirstStepAfterTheResume",
       [=](Input& t) {
         t.in.status.restart_attempt = t.in.status.restart_count = 1;
         t.in.status.last_fault = api::Fault{"PodFailed", "exit 137", "j-node-1", "node-b", 1, 137, At(2s), At(1s)};
         t.in.pods = {Pod(0, "Running", 1), Pod(1, "Running", 1)};
         progress(R"({"step": 11, "attempt": 1, "recovery": {"resumedFromStep": 10,
                      "firstStepTime": "2027-01-15T08:00:31.500Z", "checkpointLoadSeconds": 2.0}})")(t);
       },
       Case::kRunning, "Running", kEnsure, {"Recovered"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->last_recovery_seconds, 30.5);
         EXPECT_EQ(p.status->last_recovery_attempt, 1);
         EXPECT_EQ(p.events[0].message,
                   "recovered in 30.5 s from the fault of pod j-node-1 to step 11 (resumed from step 10): "
                   "checkpoint load 2.0 s");
       }},
      {"RecoveryIsRecordedOncePerAttempt",
       [=](Input& t) {
         t.in.status.restart_attempt = t.in.status.restart_count = 1;
         t.in.status.last_fault = api::Fault{"PodFailed", "exit 137", "j-node-1", "node-b", 1, 137, At(2s), At(1s)};
         t.in.status.last_recovery_seconds = 30.5;
         t.in.status.last_recovery_attempt = 1;
         t.in.pods = {Pod(0, "Running", 1), Pod(1, "Running", 1)};
         progress(R"({"step": 12, "attempt": 1, "recovery": {"resumedFromStep": 10,
                      "firstStepTime": "2027-01-15T08:00:31.500Z"}})")(t);
       },
       Case::kRunning, "Running", kEnsure, {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->last_recovery_seconds, 30.5); }},
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


class DecideLifecycle : public ::testing::TestWithParam<Row> {};
TEST_P(DecideLifecycle, Row) { CheckRow(GetParam()); }
// spec.estimateOnly: the dry run's estimate in status, nothing created until
// the flag is turned off; a running job ignores it.
std::vector<Row> EstimateRows() {
  auto dry_run = [](Input& t, nlohmann::json trainer_config) {
    t.in.status = {};
    t.in.pods.clear();
    t.spec = ParsedSpec({{"image", "hypertrain:test"},
                         {"nodes", 2},
                         {"instanceType", "ml.p5.48xlarge"},
                         {"estimateOnly", true},
                         {"trainerConfig", trainer_config}});
  };
  const nlohmann::json inline_1b = {{"inline", "trainer: {max_steps: 50}\nmodel: {shape: 1b, train_batch_size: 2}\n"}};
  return {
      {"EstimateOnlyPutsTheEstimateInStatusAndCreatesNothing", [=](Input& t) { dry_run(t, inline_1b); },
       Case::kEstimateOnly, "Estimated", {}, {"EstimateReady"}, std::nullopt,
       [](const Plan& p, const Input&) {
         ASSERT_TRUE(p.status->estimate.is_object());
         EXPECT_EQ(p.status->estimate["parameters"], 1235814400);
         EXPECT_EQ(p.status->estimate["worldSize"], 16);
         EXPECT_EQ(p.status->estimate["fits"], true);
         EXPECT_EQ(Cond(p, api::kCondEstimated).status, "True");
         EXPECT_THAT(Cond(p, api::kCondEstimated).message, HasSubstr("1.24 B parameters on 16 ranks"));
         EXPECT_TRUE(p.status->start_time.empty());
         EXPECT_EQ(p.status->gpus, 16);
       }},
      {"EstimateOnlyWithAConfigMapSaysWhy",
       [](Input& t) {
         t.in.status = {};
         t.in.pods.clear();
         t.spec = ParsedSpec({{"image", "hypertrain:test"},
                              {"instanceType", "ml.p5.48xlarge"},
                              {"estimateOnly", true},
                              {"trainerConfig", {{"configMapRef", {{"name", "cfg"}}}}}});
       },
       Case::kEstimateOnly, "Estimated", {}, {}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(Cond(p, api::kCondEstimated).status, "False");
         EXPECT_EQ(Cond(p, api::kCondEstimated).reason, api::reason::kEstimateUnavailable);
         EXPECT_THAT(Cond(p, api::kCondEstimated).message, HasSubstr("inline configs only"));
         EXPECT_TRUE(p.status->estimate.is_null());
       }},
      {"EstimateOnlyTurnedOffStartsTheJobAndKeepsTheEstimate",
       [=](Input& t) {
         dry_run(t, inline_1b);
         t.in.status = t.Decide().status.value();
         t.spec.estimate_only = false;
       },
       // Created (and the state after Estimated) once the pods are observed.
       Case::kCreating, "Estimated", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {},
       std::nullopt,
       [](const Plan& p, const Input& t) {
         EXPECT_EQ(p.status->estimate, t.in.status.estimate);
         EXPECT_EQ(Cond(p, api::kCondEstimated).status, "True");
         Input next = t;
         next.in.status = *p.status;
         next.in.pods = {Pod(0, "Pending"), Pod(1, "Pending")};
         const Plan created = next.Decide();
         EXPECT_EQ(created.status->state, "Created");
         EXPECT_EQ(created.status->estimate, t.in.status.estimate);
         ASSERT_EQ(created.events.size(), 1u);
         EXPECT_EQ(created.events[0].reason, "JobCreated");
       }},
      {"EstimateOnlyIsIgnoredOnceTheJobRuns", [](Input& t) { t.spec.estimate_only = true; }, Case::kRunning,
       "Running", {"create Service j", "create ConfigMap j-config"}, {}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_TRUE(p.status->estimate.is_null()); }},
  };
}

INSTANTIATE_TEST_SUITE_P(Spec, DecideLifecycle, ::testing::ValuesIn(SpecRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Finished, DecideLifecycle, ::testing::ValuesIn(FinishedRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Suspend, DecideLifecycle, ::testing::ValuesIn(SuspendRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Run, DecideLifecycle, ::testing::ValuesIn(RunRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Progress, DecideLifecycle, ::testing::ValuesIn(ProgressRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Estimate, DecideLifecycle, ::testing::ValuesIn(EstimateRows()), RowName);

// The plan is a function of its input: the same pass twice gives the same plan,
// and a pass over the status it produced asks for nothing new (level-triggered).
TEST(DecideTest, CreatedOnceThePodsExistThenAPassOverItsOwnStatusChangesNothing) {
  Input t;
  t.in.status = {};
  t.in.pods.clear();
  Plan first = t.Decide();
  EXPECT_TRUE(first.events.empty());
  t.in.status = *first.status;
  for (int rank : {0, 1}) t.in.pods.push_back(Pod(rank, "Pending"));
  Plan second = t.Decide();
  EXPECT_EQ(second.decision, Case::kRunning);
  EXPECT_EQ(second.status->state, "Created");
  EXPECT_EQ(second.status->pods.active, 2);
  EXPECT_EQ(Cond(second, api::kCondCreated).message, "created the headless Service and 2 pods");
  ASSERT_EQ(second.events.size(), 1u);
  EXPECT_EQ(second.events[0].reason, "JobCreated");
  t.in.status = *second.status;
  Plan third = t.Decide();
  EXPECT_EQ(third.status, second.status);
  EXPECT_TRUE(third.events.empty());
}

// Issue 19, defect 7: STEP kept the previous attempt's step after a gang restart.
TEST(DecideTest, AGangRestartClearsProgressAndAnEarlierAttemptsReportIsIgnored) {
  Input t;
  t.in.status.progress = api::Progress{43, 50, 2.5, std::nullopt, 40, At(50s)};
  Fail(t.pod(1), 137, At(59s), "killed");
  const Plan restart = t.Decide();
  ASSERT_EQ(restart.status->state, "Restarting");
  EXPECT_FALSE(restart.status->progress) << "STEP shows the next attempt's step, once it reports";

  Input next;  // attempt 1 runs; the ConfigMap still holds attempt 0's last report
  next.in.status = *restart.status;
  next.in.pods = {Pod(0, "Running", 1), Pod(1, "Running", 1)};
  next.in.progress = R"({"step": 43, "attempt": 0})";
  EXPECT_FALSE(next.Decide().status->progress);
  next.in.progress = R"({"step": 41, "attempt": 1})";
  ASSERT_TRUE(next.Decide().status->progress);
  EXPECT_EQ(next.Decide().status->progress->step, 41);
  next.in.progress = R"({"step": 42})";  // a launcher that does not say its attempt
  EXPECT_EQ(next.Decide().status->progress->step, 42);
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
