// Decide, table-driven, on plain structs: the fault rows of the reconciler's
// table (reconciler.h): a failed pod (non-retryable, budget left, budget
// exhausted, eviction, repeat offenders), the settle window (waiting, expired,
// root cause arriving, a node fault while waiting) and node health (unhealthy,
// gone, NotReady within and past the grace). Harness: plan_testing.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/plan.h"
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller {
namespace {

using namespace plantest;  // NOLINT: the table's vocabulary
using ::testing::HasSubstr;

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
      {"StoppedPodIsNoNodeFault",  // kubectl delete pod, a drain: SIGTERM, exit 143
       [](Input& t) {
         t.spec.fault_policy.max_repeat_offenders = 1;
         Fail(t.pod(1), 143);
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_TRUE(p.status->node_faults.empty());
         EXPECT_TRUE(p.status->excluded_nodes.empty());
         EXPECT_EQ(p.status->last_fault->node, "node-b");
         EXPECT_EQ(p.status->last_fault->exit_code, 143);
       }},
      {"EvictedPodIsNoNodeFault",
       [](Input& t) {
         t.spec.fault_policy.max_repeat_offenders = 1;
         t.pod(0).phase = "Failed";
         t.pod(0).fault = PodFault{api::reason::kPodEvicted, "Evicted by a drain", std::nullopt, ""};
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodEvicted"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_TRUE(p.status->node_faults.empty());
         EXPECT_TRUE(p.status->excluded_nodes.empty());
       }},
      {"KilledPodIsANodeFault",  // 137: SIGKILL, e.g. the OOM killer or a dead device
       [](Input& t) {
         t.spec.fault_policy.max_repeat_offenders = 1;
         Fail(t.pod(1), 137);
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0", "delete Pod j-node-1"}, {"PodFailed", "NodeFault"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->node_faults.at("node-b"), 1);
         EXPECT_EQ(p.status->excluded_nodes, std::vector<std::string>{"node-b"});
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


class DecideFaults : public ::testing::TestWithParam<Row> {};
TEST_P(DecideFaults, Row) { CheckRow(GetParam()); }
INSTANTIATE_TEST_SUITE_P(FailedPod, DecideFaults, ::testing::ValuesIn(FailedPodRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Settle, DecideFaults, ::testing::ValuesIn(SettleRows()), RowName);
INSTANTIATE_TEST_SUITE_P(Node, DecideFaults, ::testing::ValuesIn(NodeRows()), RowName);

}  // namespace
}  // namespace hypertrain::controller
