// Fault classification on plain structs, and the JSON → struct reading of pods
// and nodes that feeds it.
#include "operator/controller/faults.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/time.h"
#include "operator/api/training_job.h"

namespace hypertrain::controller {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const Clock::time_point t0 = *ParseRfc3339("2027-01-15T08:00:00Z");

ObservedPod Pod(int rank, const std::string& phase, std::optional<int> exit_code = std::nullopt,
                const std::string& finished_at = "") {
  ObservedPod p;
  p.name = "j-node-" + std::to_string(rank);
  p.uid = "uid-" + std::to_string(rank);
  p.node_rank = rank;
  p.restart_attempt = 0;
  p.phase = phase;
  p.node_name = "n" + std::to_string(rank);
  p.fault.exit_code = exit_code;
  p.fault.finished_at = finished_at;
  return p;
}

Gang GangOf(const std::vector<ObservedPod>& pods) {
  Gang g;
  for (const ObservedPod& p : pods) g.emplace(p.node_rank, &p);
  return g;
}

struct CulpritRow {
  const char* name;
  std::vector<ObservedPod> pods;
  int want_rank;  // -1: none
};

TEST(FindCulpritTest, RanksRootCausesBeforeFollowOnExits) {
  const std::vector<CulpritRow> rows = {
      {"none failed", {Pod(0, "Running"), Pod(1, "Succeeded", 0)}, -1},
      {"the only failure", {Pod(0, "Running"), Pod(1, "Failed", 137)}, 1},
      {"a signal outranks an earlier 200",
       {Pod(0, "Failed", 200, "2026-11-22T07:13:08Z"), Pod(1, "Failed", 137, "2026-11-22T07:13:09Z")}, 1},
      {"201 outranks 200", {Pod(0, "Failed", 200, "2026-11-22T07:13:01Z"), Pod(1, "Failed", 201, "2026-11-22T07:13:09Z")},
       1},
      {"among 200s the earliest finishedAt",
       {Pod(0, "Failed", 200, "2026-11-22T07:14:02Z"), Pod(1, "Failed", 200, "2026-11-22T07:14:01Z")}, 1},
      {"unknown finishedAt: the lowest rank",
       {Pod(0, "Failed", 200), Pod(1, "Failed", 200, "2026-11-22T07:14:01Z")}, 0},
      {"an eviction (no exit code) is a root cause", {Pod(0, "Failed", 200), Pod(1, "Failed")}, 1},
  };
  for (const CulpritRow& row : rows) {
    SCOPED_TRACE(row.name);
    auto c = FindCulprit(GangOf(row.pods));
    EXPECT_EQ(c ? c->rank : -1, row.want_rank);
  }
}

TEST(FindCulpritTest, FaultMessageNamesPodRankNodeAndExit) {
  ObservedPod p = Pod(3, "Failed", 137);
  p.fault.message = "OOMKilled";
  EXPECT_EQ(CulpritFault(Culprit{3, &p}),
            (DetectedFault{api::reason::kPodFailed, "pod j-node-3 (node rank 3, node n3) exited with code 137: OOMKilled",
                           "j-node-3", "n3", 3, 137}));
}

TEST(SettleWindowTest, WaitsFromTheEarliestFollowOnExit) {
  std::vector<ObservedPod> pods = {Pod(0, "Failed", 200, "2027-01-15T08:00:03Z"),
                                   Pod(1, "Failed", 201, "2027-01-15T08:00:02Z"), Pod(2, "Running")};
  const Gang gang = GangOf(pods);
  const Culprit culprit = *FindCulprit(gang);
  Settle s = SettleWindow(gang, culprit, {}, t0 + 4s, 5000ms);
  ASSERT_TRUE(s.wait_until);
  EXPECT_EQ(*s.wait_until, t0 + 7s);
  EXPECT_EQ(s.consulted, (std::vector<std::string>{"uid-0", "uid-1"}));
  // The first-seen memory only moves the start earlier.
  s = SettleWindow(gang, culprit, {{"uid-0", t0 + 1s}}, t0 + 4s, 5000ms);
  EXPECT_EQ(*s.wait_until, t0 + 6s);
  EXPECT_FALSE(SettleWindow(gang, culprit, {}, t0 + 7s, 5000ms).wait_until) << "expired";
  EXPECT_FALSE(SettleWindow(gang, culprit, {}, t0 + 4s, 0ms).wait_until) << "off";
}

TEST(SettleWindowTest, RootCauseOrNoRunningPeerActsAtOnce) {
  std::vector<ObservedPod> signal = {Pod(0, "Failed", 137), Pod(1, "Running")};
  Gang gang = GangOf(signal);
  Settle s = SettleWindow(gang, *FindCulprit(gang), {}, t0, 5000ms);
  EXPECT_FALSE(s.wait_until);
  EXPECT_TRUE(s.consulted.empty());
  std::vector<ObservedPod> all_done = {Pod(0, "Failed", 200), Pod(1, "Succeeded", 0)};
  gang = GangOf(all_done);
  EXPECT_FALSE(SettleWindow(gang, *FindCulprit(gang), {}, t0, 5000ms).wait_until);
}

TEST(CheckNodesTest, FirstFaultInRankOrderAndTheEarliestGraceEnd) {
  api::FaultPolicy policy;
  policy.pod_pending_or_lost_grace_seconds = 100;
  std::vector<ObservedPod> pods = {Pod(0, "Running"), Pod(1, "Running"), Pod(2, "Running"), Pod(3, "Running")};
  std::map<std::string, ObservedNode> nodes;
  for (int i = 0; i < 4; ++i) {
    ObservedNode n;
    n.name = "n" + std::to_string(i);
    n.labels[policy.node_health_label] = "Schedulable";
    nodes[n.name] = n;
  }
  nodes["n0"].not_ready_since = "2027-01-15T07:59:30Z";  // 70 s of grace left at t0
  nodes["n1"].not_ready_since = "2027-01-15T07:59:00Z";  // 40 s left
  Gang gang = GangOf(pods);
  NodeCheck c = CheckNodes(gang, nodes, policy, t0);
  EXPECT_FALSE(c.fault);
  EXPECT_EQ(c.recheck_after, std::chrono::milliseconds(40s));

  nodes.erase("n3");
  nodes["n2"].labels[policy.node_health_label] = "Unschedulable";
  c = CheckNodes(gang, nodes, policy, t0);
  ASSERT_TRUE(c.fault);
  EXPECT_EQ(c.fault->reason, api::reason::kNodeUnhealthy) << "rank 2 before rank 3";
  EXPECT_EQ(c.fault->rank, 2);
  EXPECT_EQ(c.recheck_after, std::chrono::milliseconds(40s)) << "graces of the pods checked before";

  c = CheckNodes(gang, nodes, policy, t0 + 41s);
  ASSERT_TRUE(c.fault);
  EXPECT_EQ(c.fault->reason, api::reason::kPodLost);
  EXPECT_EQ(c.fault->node, "n1");

  nodes["n0"].not_ready_since = "";  // no transition time: the grace starts now
  nodes["n1"].not_ready_since.reset();
  c = CheckNodes(gang, nodes, policy, t0);
  EXPECT_EQ(c.recheck_after, std::chrono::milliseconds(100s));
}

TEST(CheckHangTest, StartupAllowanceThenStepProgress) {
  api::FaultPolicy policy;
  policy.hang_timeout_seconds = 60;
  policy.startup_timeout_seconds = 30;  // the allowance is at least the hang timeout
  api::TrainingJobStatus st;
  api::SetJobCondition(&st, api::kCondRunning, true, api::reason::kPodsRunning, "r", "2027-01-15T08:00:00Z", 1);
  HangCheck h = CheckHang("j", st, policy, true, t0 + 59s);
  EXPECT_FALSE(h.fault);
  EXPECT_EQ(h.recheck_after, std::chrono::milliseconds(1s));
  h = CheckHang("j", st, policy, true, t0 + 60s);
  ASSERT_TRUE(h.fault);
  EXPECT_EQ(h.fault->message, "no progress report within startupTimeoutSeconds=60 of all pods running");
  EXPECT_EQ(h.fault->pod, "j-node-0");

  st.progress = api::Progress{};
  st.progress->step = 12;
  st.progress->updated_at = "2027-01-15T08:00:50Z";
  h = CheckHang("j", st, policy, true, t0 + 100s);
  EXPECT_EQ(h.recheck_after, std::chrono::milliseconds(10s));
  EXPECT_FALSE(CheckHang("j", st, policy, false, t0 + 1000s).fault) << "not every pod runs";
  policy.hang_timeout_seconds = 0;
  EXPECT_FALSE(CheckHang("j", st, policy, true, t0 + 1000s).fault) << "off";
}

TEST(ObservedTest, PodFromJsonReadsLabelsPhaseAndTheTrainersExit) {
  const json pod = json::parse(R"({
    "metadata": {"name": "j-node-1", "uid": "u1", "deletionTimestamp": "2027-01-15T08:00:00Z",
                 "labels": {"hypertrain.dev/node-rank": "1", "hypertrain.dev/restart-attempt": "x"}},
    "spec": {"nodeName": "node-b"},
    "status": {"phase": "Failed", "containerStatuses": [
      {"name": "sidecar", "state": {"terminated": {"exitCode": 9}}},
      {"name": "trainer", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                   "finishedAt": "2027-01-15T07:59:59Z"}}}]}})");
  const ObservedPod p = PodFromJson(pod);
  EXPECT_EQ(p.name, "j-node-1");
  EXPECT_EQ(p.uid, "u1");
  EXPECT_EQ(p.node_rank, 1);
  EXPECT_EQ(p.restart_attempt, -1) << "not a number";
  EXPECT_TRUE(p.deleting);
  EXPECT_EQ(p.node_name, "node-b");
  EXPECT_TRUE(p.Failed());
  EXPECT_EQ(p.fault, (PodFault{api::reason::kPodFailed, "OOMKilled", 137, "2027-01-15T07:59:59Z"}));

  const ObservedPod bare = PodFromJson(json::parse(R"({"metadata": {"name": "p"}})"));
  EXPECT_EQ(bare.phase, "Pending");
  EXPECT_EQ(bare.node_rank, -1);
  EXPECT_FALSE(bare.deleting);
}

TEST(ObservedTest, EvictionAndPodLevelMessages) {
  ObservedPod p = PodFromJson(json::parse(
      R"({"status": {"phase": "Failed", "reason": "Evicted", "message": "low on memory",
                     "containerStatuses": [{"name": "trainer", "state": {"terminated": {"exitCode": 137}}}]}})"));
  EXPECT_EQ(p.fault, (PodFault{api::reason::kPodEvicted, "low on memory", std::nullopt, ""}));
  p = PodFromJson(json::parse(R"({"status": {"phase": "Failed", "reason": "DeadlineExceeded"}})"));
  EXPECT_EQ(p.fault, (PodFault{api::reason::kPodFailed, "DeadlineExceeded", std::nullopt, ""}));
  // kubelet reports the termination log verbatim, the launcher's newline included.
  p = PodFromJson(json::parse(R"({"status": {"phase": "Failed", "containerStatuses": [{"name": "trainer",
      "state": {"terminated": {"exitCode": 1, "message": "rank 1 was killed by signal 9 (Killed)\n"}}}]}})"));
  EXPECT_EQ(p.fault, (PodFault{api::reason::kPodFailed, "rank 1 was killed by signal 9 (Killed)", 1, ""}));
}

TEST(ObservedTest, NodeFromJsonReadsLabelsAndReadiness) {
  ObservedNode n = NodeFromJson(json::parse(R"({
    "metadata": {"name": "hp-1", "labels": {"a": "b", "n": 3}},
    "status": {"conditions": [{"type": "MemoryPressure", "status": "True"},
                              {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2027-01-15T08:00:00Z"}]}})"));
  EXPECT_EQ(n.name, "hp-1");
  EXPECT_EQ(n.labels, (std::map<std::string, std::string>{{"a", "b"}}));
  EXPECT_EQ(n.not_ready_since, "2027-01-15T08:00:00Z");
  n = NodeFromJson(json::parse(R"({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})"));
  EXPECT_FALSE(n.not_ready_since);
}

}  // namespace
}  // namespace hypertrain::controller
