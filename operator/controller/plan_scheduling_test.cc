// Decide, table-driven: the rows about getting a gang scheduled: the gang's
// PodGroup, waiting for Kueue's admission, the scheduling timeout (torn down,
// retried after a backoff, or Failed/Unschedulable), the spec's warnings, and
// the exit-code policy. The harness is plan_testing.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/plan.h"
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller {
namespace {

using namespace plantest;  // NOLINT: the table's vocabulary
using ::testing::HasSubstr;

constexpr char kNoGpus[] = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";

// Created a minute ago and not all Running: rank 0 runs on node-a, rank 1 has
// no node and the scheduler says why; the timeout is 300 s.
void PendingGang(Input& t) {
  api::TrainingJobStatus& s = t.in.status;
  s = {};
  api::SetJobCondition(&s, api::kCondCreated, true, api::reason::kJobCreated, "created", kT0, 3);
  s.observed_generation = 3;
  s.start_time = kT0;
  s.world_size = 4;
  s.pods.active = 2;
  s.scheduling.start_time = kT0;
  s.scheduling.message = "pod j-node-1: " + std::string(kNoGpus);
  t.pod(1).phase = "Pending";
  t.pod(1).node_name = "";
  t.pod(1).unschedulable_message = kNoGpus;
  t.spec.run_policy.scheduling_timeout_seconds = 300;
}

void TimedOut(Input& t) {
  PendingGang(t);
  t.now = t0 + 301s;
}

void Retries(Input& t, int limit, int backoff) {
  TimedOut(t);
  t.spec.run_policy.scheduling_retry.limit = limit;
  t.spec.run_policy.scheduling_retry.backoff_seconds = backoff;
  t.spec.run_policy.scheduling_retry.max_backoff_seconds = 3600;
}

void Kueue(Input& t) {
  t.spec.scheduling.gang.provider = api::GangProvider::kKueue;
  t.spec.scheduling.gang.queue_name = "q";
}

// Long on purpose (as GangRows below): one table of Decide rows, data rather
// than logic, that reads best as a whole.
std::vector<Row> TimeoutRows() {
  const std::vector<std::string> delete_both = {"delete Pod j-node-0", "delete Pod j-node-1"};
  return {
      {"PendingGangWaitsForItsDeadlineAndSaysWhy", PendingGang, Case::kRunning, "Created", kEnsure, {},
       milliseconds(240s),
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->scheduling.message, "pod j-node-1: " + std::string(kNoGpus));
         EXPECT_EQ(p.status->scheduling.start_time, kT0);
       }},
      {"WithoutATimeoutAPendingGangWaitsForever",
       [](Input& t) {
         PendingGang(t);
         t.spec.run_policy.scheduling_timeout_seconds = 0;
         t.now = t0 + 10h;
       },
       Case::kRunning, "Created", kEnsure, {}, std::nullopt},
      {"TimeoutWithoutRetriesFailsUnschedulableAndFreesTheGpus", TimedOut, Case::kUnschedulable, "Failed", delete_both,
       {"Unschedulable"}, std::nullopt,
       [](const Plan& p, const Input&) {
         const std::string msg = Cond(p, api::kCondFailed).message;
         EXPECT_EQ(Cond(p, api::kCondFailed).reason, "Unschedulable");
         EXPECT_THAT(msg, HasSubstr("not all Running within schedulingTimeoutSeconds=300 (1 of 2 pods Running, "
                                    "1 bound to nodes); pod j-node-1: 0/2 nodes are available"));
         EXPECT_EQ(p.status->last_fault->reason, "Unschedulable");
         EXPECT_EQ(p.status->last_fault->pod, "j-node-1");
         EXPECT_EQ(p.status->scheduling.timeouts, 1);
         EXPECT_EQ(p.status->completion_time, At(301s));
       }},
      {"TimeoutFailsEvenWithCleanPodPolicyNone",
       [](Input& t) {
         TimedOut(t);
         t.spec.run_policy.clean_pod_policy = api::CleanPodPolicy::kNone;
         Fail(t.pod(0), 137);  // terminated pods need no deletion to free their GPUs
       },
       Case::kFault, "Restarting", delete_both, {"PodFailed"}, std::nullopt},
      {"TimeoutWithRetriesTearsTheGangDownAndBacksOff",
       [](Input& t) { Retries(t, 2, 30); }, Case::kUnschedulable, "Restarting", delete_both, {"Unschedulable"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_THAT(Cond(p, api::kCondRestarting).message, HasSubstr("torn down, retry 1 of 2 in 30s"));
         EXPECT_EQ(p.status->restart_attempt, 1);
         EXPECT_EQ(p.status->restart_count, 0);  // not counted unless configured
         EXPECT_EQ(p.status->scheduling.retry_time, At(331s));
         EXPECT_EQ(p.status->scheduling.start_time, "");
         EXPECT_EQ(p.status->scheduling.timeouts, 1);
         EXPECT_FALSE(api::IsFinished(*p.status));
       }},
      {"SecondTimeoutBacksOffTwiceAsLong",
       [](Input& t) {
         Retries(t, 2, 30);
         t.in.status.scheduling.timeouts = 1;
         t.in.status.restart_attempt = 1;
         for (int r : {0, 1}) t.pod(r).restart_attempt = 1;
       },
       Case::kUnschedulable, "Restarting", delete_both, {"Unschedulable"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_THAT(Cond(p, api::kCondRestarting).message, HasSubstr("retry 2 of 2 in 60s"));
         EXPECT_EQ(p.status->scheduling.retry_time, At(361s));
         EXPECT_EQ(p.status->restart_attempt, 2);
       }},
      {"RetriesSpentFailUnschedulable",
       [](Input& t) {
         Retries(t, 2, 30);
         t.in.status.scheduling.timeouts = 2;
       },
       Case::kUnschedulable, "Failed", delete_both, {"Unschedulable"}, std::nullopt},
      {"RetryCountsTowardBackoffLimitWhenConfigured",
       [](Input& t) {
         Retries(t, 2, 30);
         t.spec.run_policy.scheduling_retry.counts_toward_backoff_limit = true;
       },
       Case::kUnschedulable, "Restarting", delete_both, {"Unschedulable"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->restart_count, 1); }},
      {"RetryWithoutRestartBudgetFails",
       [](Input& t) {
         Retries(t, 2, 30);
         t.spec.run_policy.scheduling_retry.counts_toward_backoff_limit = true;
         t.in.status.restart_count = t.spec.run_policy.backoff_limit;
       },
       Case::kUnschedulable, "Failed", delete_both, {"Unschedulable"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_THAT(Cond(p, api::kCondFailed).message, HasSubstr("restart budget backoffLimit=3 exhausted"));
       }},
      {"BackoffWaitsBeforeCreatingTheNextAttempt",
       [](Input& t) {
         Retries(t, 2, 30);
         api::SetJobCondition(&t.in.status, api::kCondRestarting, true, api::reason::kUnschedulable, "r", At(30s), 3);
         t.in.status.restart_attempt = 1;
         t.in.status.scheduling = {"", 1, At(90s), ""};
         t.in.pods.clear();
         t.now = t0 + 60s;
       },
       Case::kSchedulingBackoff, "Restarting", {}, {}, milliseconds(30s)},
      {"AfterTheBackoffTheNextAttemptIsCreatedAndItsClockStarts",
       [](Input& t) {
         Retries(t, 2, 30);
         api::SetJobCondition(&t.in.status, api::kCondRestarting, true, api::reason::kUnschedulable, "r", At(30s), 3);
         t.in.status.restart_attempt = 1;
         t.in.status.scheduling = {"", 1, At(90s), ""};
         t.in.pods.clear();
         t.now = t0 + 91s;
       },
       Case::kCreating, "Restarting", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {}, std::nullopt,
       [](const Plan& p, const Input& t) {
         EXPECT_EQ(PodOf(p, 6, t)["metadata"]["labels"]["hypertrain.dev/restart-attempt"], "1");
         EXPECT_EQ(p.status->scheduling.retry_time, "");
         EXPECT_EQ(p.status->scheduling.start_time, At(91s));
       }},
      {"AllRunningEndsTheWait",
       [](Input& t) {
         PendingGang(t);
         t.pod(1) = Pod(1);
         t.now = t0 + 299s;
       },
       Case::kRunning, "Running", kEnsure, {"PodsRunning"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->scheduling.message, ""); }},
  };
}

std::vector<Row> GangRows() {
  auto fresh = [](Input& t) {
    t.in.status = {};
    t.in.pods.clear();
  };
  return {
      {"KueueGatedGangWaitsForAdmissionWithoutAClock",
       [](Input& t) {
         TimedOut(t);
         Kueue(t);
         t.in.status.scheduling.start_time = "";
         for (int r : {0, 1}) {
           t.pod(r) = Pod(r, "Pending");
           t.pod(r).node_name = "";
           t.pod(r).gated = true;
         }
         t.now = t0 + 10h;
       },
       Case::kRunning, "Created", kEnsure, {}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->scheduling.message, "waiting for admission by Kueue (LocalQueue q): 2 of 2 pods gated");
         EXPECT_EQ(p.status->scheduling.start_time, "");
       }},
      {"KueueCreationLeavesTheClockToAdmission",
       [=](Input& t) {
         fresh(t);
         Kueue(t);
         t.spec.run_policy.scheduling_timeout_seconds = 60;
       },
       // Created once the pods exist (a refused pod is never reported as created).
       Case::kCreating, "Pending", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {}, std::nullopt,
       [](const Plan& p, const Input& t) {
         EXPECT_EQ(p.status->scheduling.start_time, "");
         EXPECT_EQ(PodOf(p, 6, t)["spec"]["schedulingGates"][0]["name"], "kueue.x-k8s.io/admission");
       }},
      {"KueueAdmittedGangStartsTheClock",
       [](Input& t) {
         PendingGang(t);
         Kueue(t);
         t.in.status.scheduling.start_time = "";
       },
       Case::kRunning, "Created", kEnsure, {}, milliseconds(300s),
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->scheduling.start_time, At(60s)); }},
      {"CoschedulingCreatesThePodGroupBeforeThePods",
       [=](Input& t) {
         fresh(t);
         t.spec.scheduling.gang.provider = api::GangProvider::kCoscheduling;
       },
       Case::kCreating, "Pending",
       Ensure({"create PodGroup j-job-uid", "create ServiceAccount j-trainer", "create ConfigMap j-progress",
               "create Role j-progress", "create RoleBinding j-progress", "create Pod j-node-0", "create Pod j-node-1"}),
       {}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.actions[2].object["spec"]["minMember"], 2);
         EXPECT_EQ(p.status->scheduling.start_time, At(60s));
       }},
      {"VolcanoPodGroupIsEnsuredWhileRunning",
       [](Input& t) { t.spec.scheduling.gang.provider = api::GangProvider::kVolcano; },
       Case::kRunning, "Running", Ensure({"create PodGroup j-job-uid"}), {}, std::nullopt},
      {"SpecWarningsAreWarningEventsWithTheJobsCreation",
       [=](Input& t) {
         fresh(t);
         t.spec.warnings = {"instance type ml.p9.48xlarge is not in the operator's table"};
       },
       Case::kCreating, "Pending", EnsureAndCreate({"create Pod j-node-0", "create Pod j-node-1"}), {"SpecWarning"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.events[0].type, EventType::kWarning);
         EXPECT_THAT(p.events[0].message, HasSubstr("ml.p9.48xlarge"));
       }},
      {"FailedKueueJobEndsItsPodGroupToReleaseTheQuota",
       [](Input& t) {
         Kueue(t);
         api::SetJobCondition(&t.in.status, api::kCondFailed, true, api::reason::kNonRetryableExitCode, "x", At(10s), 3);
         Fail(t.pod(1), 1);
       },
       Case::kFinished, "Failed", {"patch Pod j-node-1", "delete Pod j-node-0"}, {}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.actions[0].object["metadata"]["annotations"]["kueue.x-k8s.io/retriable-in-group"], "false");
         EXPECT_EQ(p.actions[0].uid, "j-node-1-a0");
       }},
      {"AnEndedKueueGroupIsNotPatchedAgain",
       [](Input& t) {
         Kueue(t);
         api::SetJobCondition(&t.in.status, api::kCondFailed, true, api::reason::kNonRetryableExitCode, "x", At(10s), 3);
         Fail(t.pod(1), 1);
         t.pod(1).final_in_group = true;
       },
       Case::kFinished, "Failed", {"delete Pod j-node-0"}, {}, std::nullopt},
      {"ASucceededKueueGroupEndsByItself",
       [](Input& t) {
         Kueue(t);
         api::SetJobCondition(&t.in.status, api::kCondSucceeded, true, api::reason::kAllPodsSucceeded, "x", At(10s), 3);
         t.pod(0).phase = t.pod(1).phase = "Succeeded";
       },
       Case::kFinished, "Succeeded", {}, {}, std::nullopt},
      {"SpecWarningsAreNotRepeated", [](Input& t) { t.spec.warnings = {"w"}; }, Case::kRunning, "Running", kEnsure, {},
       std::nullopt},
  };
}

std::vector<Row> ExitCodeRows() {
  const std::vector<std::string> delete_running = {"delete Pod j-node-0"};
  const std::vector<std::string> delete_all = {"delete Pod j-node-0", "delete Pod j-node-1"};
  return {
      {"CommandNotFoundFailsAtOnce", [](Input& t) { Fail(t.pod(1), 127, "", "exec: train.py: not found"); },
       Case::kFault, "Failed", delete_running, {"NonRetryableExitCode"}, std::nullopt},
      {"AUserErrorCodeFailsAtOnce", [](Input& t) { Fail(t.pod(1), 42); }, Case::kFault, "Failed", delete_running,
       {"NonRetryableExitCode"}, std::nullopt},
      {"AListedRetryableCodeRestarts",
       [](Input& t) {
         Fail(t.pod(1), 42);
         t.spec.fault_policy.retryable_exit_codes = {42};
       },
       Case::kFault, "Restarting", delete_all, {"PodFailed"}, std::nullopt},
      {"ASignalRestarts", [](Input& t) { Fail(t.pod(1), 143); }, Case::kFault, "Restarting", delete_all, {"PodFailed"},
       std::nullopt},
      {"AListedNonRetryableSignalFails",
       [](Input& t) {
         Fail(t.pod(1), 137, "", "OOMKilled");
         t.spec.fault_policy.non_retryable_exit_codes = {137};
       },
       Case::kFault, "Failed", delete_running, {"NonRetryableExitCode"}, std::nullopt},
      {"AConfigErrorNeverRestarts",
       [](Input& t) {
         Fail(t.pod(1), 2);
         t.spec.fault_policy.retryable_exit_codes = {2};  // parsing refuses this; Decide holds anyway
       },
       Case::kFault, "Failed", delete_running, {"NonRetryableExitCode"}, std::nullopt},
  };
}

class Timeout : public ::testing::TestWithParam<Row> {};
TEST_P(Timeout, Row) { CheckRow(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Scheduling, Timeout, ::testing::ValuesIn(TimeoutRows()), RowName);

class Gang : public ::testing::TestWithParam<Row> {};
TEST_P(Gang, Row) { CheckRow(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Scheduling, Gang, ::testing::ValuesIn(GangRows()), RowName);

class ExitCode : public ::testing::TestWithParam<Row> {};
TEST_P(ExitCode, Row) { CheckRow(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Policy, ExitCode, ::testing::ValuesIn(ExitCodeRows()), RowName);

}  // namespace
}  // namespace hypertrain::controller
