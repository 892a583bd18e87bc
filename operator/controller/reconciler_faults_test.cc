// The reconciler against the real local control plane (reconciler_testing.h):
// gang restarts and their budget, non-retryable exits, repeat-offender nodes,
// root-cause attribution and the settle window, hangs, unhealthy or lost nodes.
#include "operator/controller/reconciler_testing.h"

namespace hypertrain::controller {
namespace {

using testing::kConfig;
using testing::kNs;
using testing::ReconcilerTest;
using kube::Json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST_F(ReconcilerTest, GangRestartThenBudgetExhausted) {
  Json spec = CpuSpec();
  spec["runPolicy"] = {{"backoffLimit", 1}};
  CreateJob("gang", spec);
  Converge("gang");
  SetAllPhases("gang", "Running");
  Converge("gang");
  SetPhase("gang-node-1", "Failed", 137, "OOMKilled");
  Converge("gang");
  Json st = Job("gang")["status"];
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_EQ(st["restartAttempt"], 1);
  EXPECT_EQ(st["state"], "Restarting");
  EXPECT_EQ(st["lastFault"]["exitCode"], 137);
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  auto pods = JobPods("gang");
  ASSERT_EQ(pods.size(), 2u) << "the whole gang is recreated";
  for (const Json& p : pods) EXPECT_EQ(p["metadata"]["labels"][api::kLabelRestartAttempt], "1");
  for (const Json& p : pods) {
    bool found = false;
    for (const Json& e : p["spec"]["containers"][0]["env"]) {
      if (e["name"] == "RESTART_ATTEMPT") found = e["value"] == "1";
    }
    EXPECT_TRUE(found);
  }
  SetAllPhases("gang", "Running");
  Converge("gang");
  EXPECT_EQ(Job("gang")["status"]["state"], "Running");
  SetPhase("gang-node-0", "Failed", 201, "collective timeout");
  Converge("gang");
  // Only a follow-on exit (no finishedAt) while node 1 runs: the settle window
  // counts from when the reconciler first saw it.
  EXPECT_EQ(Job("gang")["status"]["state"], "Running");
  now_ += ReconcilerOptions{}.fault_settle_window;
  Converge("gang");
  EXPECT_EQ(Condition("gang", "Failed", "reason"), "BackoffLimitExceeded");
  EXPECT_EQ(Job("gang")["status"]["restartCount"], 1);
  EXPECT_EQ(counters_.jobs_restarted->With({kNs}).Value(), 1);
}

TEST_F(ReconcilerTest, NonRetryableExitFailsAtOnceAndCleansRunningPods) {
  CreateJob("cfg", CpuSpec());
  Converge("cfg");
  SetAllPhases("cfg", "Running");
  Converge("cfg");
  SetPhase("cfg-node-0", "Failed", 2, "model.hidden_size: must be > 0");
  Converge("cfg");
  EXPECT_EQ(Condition("cfg", "Failed", "reason"), "NonRetryableExitCode");
  EXPECT_THAT(Condition("cfg", "Failed", "message"), HasSubstr("exited with code 2: model.hidden_size"));
  EXPECT_EQ(Job("cfg")["status"]["restartCount"], 0);
  auto pods = JobPods("cfg");
  ASSERT_EQ(pods.size(), 1u) << "the running pod is deleted (cleanPodPolicy Running)";
  EXPECT_EQ(kube::NameOf(pods[0]), "cfg-node-0");
}

TEST_F(ReconcilerTest, RepeatOffenderNodeIsExcluded) {
  Json spec = CpuSpec(1);
  spec["runPolicy"] = {{"backoffLimit", 5}};
  spec["faultPolicy"] = {{"maxRepeatOffenders", 2}, {"healthyNodeValues", Json::array()}};
  CreateJob("rep", spec);
  for (int round = 0; round < 2; ++round) {
    Converge("rep");
    Bind("rep-node-0", "node-a");
    SetPhase("rep-node-0", "Failed", 200, "retryable");
    Converge("rep");
  }
  Json st = Job("rep")["status"];
  EXPECT_EQ(st["nodeFaults"]["node-a"], 2);
  EXPECT_EQ(st["excludedNodes"], Json({"node-a"}));
  EXPECT_EQ(st["lastFault"]["node"], "node-a");
  auto pods = JobPods("rep");
  ASSERT_EQ(pods.size(), 1u);
  const Json& expr = pods[0]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                         ["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], "kubernetes.io/hostname");
  EXPECT_EQ(expr["operator"], "NotIn");
  EXPECT_EQ(expr["values"], Json({"node-a"}));
  auto reasons = EventReasons("rep");
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "NodeFault"), reasons.end());
}


// Several pods of a gang failed before the operator looked: the fault is the
// root cause's, not the lowest rank's. A killed rank (137) outranks its peer
// that then lost a collective (200) even when the peer finished first; among
// follow-on exits the earliest finishedAt wins.
TEST_F(ReconcilerTest, GangFaultIsAttributedToTheRootCausePod) {
  Json spec = CpuSpec();
  spec["runPolicy"] = {{"backoffLimit", 5}};
  spec["faultPolicy"] = {{"maxRepeatOffenders", 1}, {"healthyNodeValues", Json::array()}};
  CreateJob("root", spec);
  Converge("root");
  Bind("root-node-0", "node-a");  // nodes the fake cluster does not list: no
  Bind("root-node-1", "node-b");  // Running phase, or the pods count as lost
  SetFailedAt("root-node-0", 200, "2026-11-22T07:13:08Z");
  SetFailedAt("root-node-1", 137, "2026-11-22T07:13:09Z");
  Converge("root");
  Json st = Job("root")["status"];
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["exitCode"], 137);
  EXPECT_EQ(st["lastFault"]["node"], "node-b");
  EXPECT_EQ(st["excludedNodes"], Json({"node-b"}));

  // Next attempt: both ranks exit 200; the one that finished first caused it.
  Converge("root");
  Bind("root-node-0", "node-c");
  Bind("root-node-1", "node-a");
  SetFailedAt("root-node-0", 200, "2026-11-22T07:14:02Z");
  SetFailedAt("root-node-1", 200, "2026-11-22T07:14:01Z");
  Converge("root");
  st = Job("root")["status"];
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["node"], "node-a");
  EXPECT_EQ(st["excludedNodes"], Json({"node-b", "node-a"}));
}

// The killed rank's own status arrives after its peer's follow-on exit (the
// race CI's faults_test hit): the reconciler waits instead of blaming the peer.
TEST_F(ReconcilerTest, FollowOnExitWaitsForTheRootCause) {
  StartTwoNodeJob("settle", 1);
  ASSERT_EQ(Job("settle")["status"]["state"], "Running");

  SetFailedAt("settle-node-0", 200, FormatRfc3339(now_));  // the peer noticed first
  WaitCaches("settle");
  auto r = reconciler_->Reconcile(std::string(kNs) + "/settle");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requeue_after.value_or(0ms), ReconcilerOptions{}.fault_settle_window) << "waiting must requeue";
  now_ += 1s;
  Converge("settle");
  Json st = Job("settle")["status"];
  EXPECT_EQ(st["state"], "Running");
  EXPECT_EQ(st.value("restartCount", 0), 0);
  EXPECT_FALSE(st.contains("lastFault"));
  EXPECT_EQ(st["pods"]["failed"], 1);
  EXPECT_EQ(JobPods("settle").size(), 2u) << "no pod is deleted while settling";

  SetFailedAt("settle-node-1", 137, FormatRfc3339(now_));  // the killed rank's status lands
  Converge("settle");
  st = Job("settle")["status"];
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["exitCode"], 137);
  EXPECT_EQ(st["lastFault"]["node"], "settle-b");
  EXPECT_EQ(st["excludedNodes"], Json({"settle-b"}));
  EXPECT_FALSE(st["nodeFaults"].contains("settle-a")) << "the innocent peer's node is not counted";

  // Next attempt: a follow-on exit, then the running peer's node vanishes: a
  // root cause without an exit code, acted on at once (no waiting).
  Converge("settle");
  Bind("settle-node-0", "settle-a");
  Bind("settle-node-1", "settle-a");
  SetAllPhases("settle", "Running");
  Converge("settle");
  SetFailedAt("settle-node-1", 201, FormatRfc3339(now_));
  Converge("settle");
  EXPECT_EQ(Job("settle")["status"]["restartCount"], 1);
  ASSERT_TRUE(Nodes().Delete("settle-a").ok());
  Converge("settle");
  st = Job("settle")["status"];
  EXPECT_EQ(st["restartCount"], 2);
  EXPECT_EQ(Condition("settle", "Restarting", "reason"), "PodLost");
  EXPECT_EQ(st["lastFault"]["rank"], 0);
  ASSERT_TRUE(Nodes().Delete("settle-b").ok());
}

// No root cause shows up: once the window since the follow-on exit's
// finishedAt has passed, the follow-on pod is blamed, as without the window.
// The window is read from the pod's status, so a fresh reconciler (an operator
// restart) honours it as well; a window of 0 turns the wait off.
TEST_F(ReconcilerTest, SettleWindowExpiresThenTheFollowOnPodIsBlamed) {
  StartTwoNodeJob("expire", 0);
  const auto window = ReconcilerOptions{}.fault_settle_window;
  SetFailedAt("expire-node-1", 200, FormatRfc3339(now_ - 1s));
  Converge("expire", MakeReconciler().get());
  EXPECT_EQ(Job("expire")["status"].value("restartCount", 0), 0);
  WaitCaches("expire");
  now_ += window - 2s;
  auto fresh = MakeReconciler();
  auto r = fresh->Reconcile(std::string(kNs) + "/expire");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requeue_after.value_or(0ms), 1000ms) << "the rest of the window since finishedAt";
  EXPECT_EQ(Job("expire")["status"].value("restartCount", 0), 0);
  now_ += 1s;
  Converge("expire", MakeReconciler().get());
  Json st = Job("expire")["status"];
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_EQ(st["lastFault"]["rank"], 1);
  EXPECT_EQ(st["lastFault"]["exitCode"], 200);
  EXPECT_EQ(st["lastFault"]["node"], "expire-b");

  // Window 0: the follow-on exit is acted on at once.
  Converge("expire");
  Bind("expire-node-0", "expire-a");
  Bind("expire-node-1", "expire-b");
  SetAllPhases("expire", "Running");
  Converge("expire");
  SetFailedAt("expire-node-0", 201, FormatRfc3339(now_));
  ReconcilerOptions o = TestOptions();
  o.fault_settle_window = 0ms;
  Reconciler no_wait(std::move(o));
  Converge("expire", &no_wait);
  st = Job("expire")["status"];
  EXPECT_EQ(st["restartCount"], 2);
  EXPECT_EQ(st["lastFault"]["rank"], 0);
  EXPECT_EQ(st["lastFault"]["exitCode"], 201);
  ASSERT_TRUE(Nodes().Delete("expire-a").ok());
  ASSERT_TRUE(Nodes().Delete("expire-b").ok());
}

TEST_F(ReconcilerTest, HangWithoutStepProgressRestartsTheGang) {
  Json spec = CpuSpec();
  spec["faultPolicy"] = {{"hangTimeoutSeconds", 600}, {"startupTimeoutSeconds", 900}, {"healthyNodeValues", Json::array()}};
  CreateJob("hang", spec);
  Converge("hang");
  SetAllPhases("hang", "Running");
  Converge("hang");
  ASSERT_EQ(Job("hang")["status"]["state"], "Running");
  // Progress within the start-up allowance, then the step stops advancing.
  now_ += 800s;
  ReportProgress("hang", R"({"step": 3})");
  Converge("hang");
  EXPECT_EQ(Job("hang")["status"]["state"], "Running");
  now_ += 599s;
  Converge("hang");
  EXPECT_EQ(Job("hang")["status"]["state"], "Running");
  now_ += 2s;
  Converge("hang");
  Json st = Job("hang")["status"];
  EXPECT_EQ(st["state"], "Restarting");
  EXPECT_EQ(Condition("hang", "Restarting", "reason"), "Hang");
  EXPECT_EQ(st["restartCount"], 1);
  EXPECT_THAT(st["lastFault"]["message"].get<std::string>(), HasSubstr("no step progress"));
  auto pods = JobPods("hang");
  ASSERT_EQ(pods.size(), 2u);
  for (const Json& p : pods) EXPECT_EQ(p["metadata"]["labels"][api::kLabelRestartAttempt], "1");
  // The new attempt gets the start-up allowance again, not the stale progress time.
  SetAllPhases("hang", "Running");
  now_ += 10s;
  Converge("hang");
  EXPECT_EQ(Job("hang")["status"]["state"], "Running");
}


TEST_F(ReconcilerTest, UnhealthyOrLostNodeRestartsTheGang) {
  CreateNode("hp-1", "Schedulable");
  CreateNode("hp-2", "Schedulable");
  Json spec = CpuSpec();
  spec["faultPolicy"] = {{"podPendingOrLostGraceSeconds", 120}, {"maxRepeatOffenders", 0}};
  CreateJob("health", spec);
  Converge("health");
  Bind("health-node-0", "hp-1");
  Bind("health-node-1", "hp-2");
  SetAllPhases("health", "Running");
  Converge("health");
  ASSERT_EQ(Job("health")["status"]["state"], "Running");
  // The node pods require the health label.
  const Json expr = JobPods("health")[0]["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(expr["key"], api::kHyperPodHealthLabel);

  ASSERT_TRUE(Nodes().Patch("hp-2", {{"metadata", {{"labels", {{api::kHyperPodHealthLabel, "UnschedulablePendingReplacement"}}}}}}).ok());
  Converge("health");
  Json st = Job("health")["status"];
  EXPECT_EQ(Condition("health", "Restarting", "reason"), "NodeUnhealthy");
  EXPECT_EQ(st["lastFault"]["node"], "hp-2");
  EXPECT_THAT(st["lastFault"]["message"].get<std::string>(), HasSubstr("UnschedulablePendingReplacement"));
  EXPECT_EQ(st["restartAttempt"], 1);

  // Next attempt: node hp-1 goes NotReady; the pod counts as lost only after the grace.
  Bind("health-node-0", "hp-1");
  Bind("health-node-1", "hp-1");
  SetAllPhases("health", "Running");
  Converge("health");
  SetNodeReady("hp-1", false, FormatRfc3339(now_));
  now_ += 60s;
  Converge("health");
  EXPECT_EQ(Job("health")["status"]["state"], "Running");
  now_ += 61s;
  Converge("health");
  EXPECT_EQ(Condition("health", "Restarting", "reason"), "PodLost");
  EXPECT_EQ(Job("health")["status"]["restartAttempt"], 2);
  ASSERT_TRUE(Nodes().Delete("hp-1").ok());
  ASSERT_TRUE(Nodes().Delete("hp-2").ok());
}

}  // namespace
}  // namespace hypertrain::controller
