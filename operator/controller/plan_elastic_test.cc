// Decide, table-driven: the rows of elastic jobs (spec.elastic): shrink when
// the gang is not all Running within the scheduling timeout, the pods of a
// resized attempt, grow back when capacity returns (not sooner than
// minResizeIntervalSeconds, looked at every checkIntervalSeconds), grow at a
// gang restart, and the size history. The harness is plan_testing.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/plan.h"
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller {
namespace {

using namespace plantest;  // NOLINT: the table's vocabulary
using nlohmann::json;
using ::testing::HasSubstr;

// The two-node job of plan_testing.h, elastic from one node, 300 s timeout.
api::TrainingJobSpec ElasticSpec(int min_nodes = 1) {
  json s = SpecJson();
  s["runPolicy"] = {{"schedulingTimeoutSeconds", 300}};
  s["elastic"] = {{"minNodes", min_nodes}, {"checkIntervalSeconds", 30}, {"minResizeIntervalSeconds", 600}};
  return ParsedSpec(s);
}

ObservedNode HostNode(const std::string& name, bool cordoned = false) {
  ObservedNode n = Node(name);
  n.unschedulable = cordoned;
  return n;
}

// Rank 1 never got a node (node-b was cordoned) and the 300 s are over.
void TimedOut(Input& t) {
  t.spec = ElasticSpec();
  api::TrainingJobStatus& s = t.in.status;
  s = {};
  api::SetJobCondition(&s, api::kCondCreated, true, api::reason::kJobCreated, "created", kT0, 3);
  s.observed_generation = 3;
  s.start_time = kT0;
  s.current_nodes = 2;
  s.pods.active = 2;
  s.scheduling.start_time = kT0;
  t.pod(1).phase = "Pending";
  t.pod(1).node_name = "";
  t.in.cluster_nodes = std::vector<ObservedNode>{HostNode("node-a"), HostNode("node-b", true)};
  t.now = t0 + 301s;
}

// Resized to one node at t0 + 301 s; attempt 1 runs on node-a since then.
void RunningOnOne(Input& t) {
  t.spec = ElasticSpec();
  api::TrainingJobStatus& s = t.in.status;
  s.current_nodes = 1;
  s.restart_attempt = 1;
  s.world_size = 2;
  s.elastic.last_resize_time = At(301s);
  s.elastic.history = {{2, kT0, "the desired size (spec.nodes)", 0, 40},
                       {1, At(301s), "1 node of 2: ...", 40, 55}};
  t.in.pods = {Pod(0, "Running", 1)};
  t.in.nodes = std::map<std::string, ObservedNode>{{"node-a", Node("node-a")}};
  t.in.cluster_nodes = std::vector<ObservedNode>{HostNode("node-a"), HostNode("node-b", true)};
  t.now = t0 + 400s;
}

std::string EnvOf(const json& pod, const std::string& name) {
  for (const json& e : pod["spec"]["containers"][0]["env"]) {
    if (e["name"] == name) return e.value("value", "");
  }
  return "<unset>";
}

std::vector<Row> ElasticRows() {
  const std::vector<std::string> delete_both = {"delete Pod j-node-0", "delete Pod j-node-1"};
  return {
      {"TimeoutShrinksToThePodsThatWerePlaced", TimedOut, Case::kResized, "Restarting", delete_both, {"Resized"},
       std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->current_nodes, 1);
         EXPECT_EQ(p.status->restart_attempt, 1);
         EXPECT_EQ(p.status->restart_count, 0);       // a resize spends no restart budget
         EXPECT_EQ(p.status->scheduling.timeouts, 0);  // nor a scheduling retry
         EXPECT_EQ(p.status->world_size, 2);
         EXPECT_EQ(Cond(p, api::kCondRestarting).reason, "Resized");
         EXPECT_THAT(Cond(p, api::kCondRestarting).message,
                     HasSubstr("resized from 2 to 1 nodes: 1 node of 2: the gang of 2 was not all Running within "
                               "schedulingTimeoutSeconds=300; 1 of 2 pods were placed"));
         ASSERT_EQ(p.status->elastic.history.size(), 2u);
         EXPECT_EQ(p.status->elastic.history[0].nodes, 2);
         EXPECT_EQ(p.status->elastic.history[1].nodes, 1);
         EXPECT_EQ(p.status->elastic.history[1].since, At(301s));
         EXPECT_EQ(p.status->elastic.last_resize_time, At(301s));
       }},
      {"UnderAGangProviderTheHostableNodesDecide",
       [](Input& t) {
         TimedOut(t);
         t.spec.scheduling.gang.provider = api::GangProvider::kCoscheduling;
         t.pod(0).node_name = "";  // all or nothing: none was bound
         t.pod(0).phase = "Pending";
       },
       Case::kResized, "Restarting", delete_both, {"Resized"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->current_nodes, 1);
         EXPECT_THAT(Cond(p, api::kCondRestarting).message,
                     HasSubstr("1 node can host a pod (node node-b: cordoned (spec.unschedulable))"));
       }},
      {"AtMinNodesTheTimeoutFollowsSchedulingRetry",
       [](Input& t) {
         TimedOut(t);
         t.spec = ElasticSpec(2);
       },
       Case::kUnschedulable, "Failed", delete_both, {"Unschedulable"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->current_nodes, 2); }},
      {"WithoutElasticTheTimeoutIsAsBefore",
       [](Input& t) {
         TimedOut(t);
         t.spec.elastic.reset();
       },
       Case::kUnschedulable, "Failed", delete_both, {"Unschedulable"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->current_nodes, 2);
         EXPECT_TRUE(p.status->elastic.empty());
       }},
      {"TheResizedAttemptHasOnePodWithTheSmallerWorld",
       [](Input& t) {
         RunningOnOne(t);
         t.in.status.conditions.clear();
         api::SetJobCondition(&t.in.status, api::kCondCreated, true, api::reason::kJobCreated, "c", kT0, 3);
         t.in.pods.clear();
         t.now = t0 + 302s;
       },
       Case::kCreating, "Created", EnsureAndCreate({"create Pod j-node-0"}), {}, std::nullopt,
       [](const Plan& p, const Input& t) {
         ASSERT_EQ(p.actions.size(), 7u);
         const json pod = PodOf(p, 6, t);
         EXPECT_EQ(EnvOf(pod, "NNODES"), "1");
         EXPECT_EQ(EnvOf(pod, "WORLD_SIZE"), "2");
         EXPECT_EQ(EnvOf(pod, "NODE_RANK"), "0");
         EXPECT_EQ(EnvOf(pod, "HYPERTRAIN_DESIRED_NNODES"), "2");
         EXPECT_EQ(EnvOf(pod, "HYPERTRAIN_RESIZE_REASON"), "1 node of 2: ...");
         EXPECT_EQ(EnvOf(pod, "RESTART_ATTEMPT"), "1");
       }},
      {"RunningBelowDesiredLooksAgainEveryCheckInterval", RunningOnOne, Case::kRunning, "Running", kEnsure, {},
       milliseconds(30s),
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->current_nodes, 1);
         EXPECT_EQ(Cond(p, api::kCondRunning).message, "all 1 pods are running (2 desired)");
       }},
      {"CapacityBackButWithinMinResizeIntervalWaits",
       [](Input& t) {
         RunningOnOne(t);
         t.in.cluster_nodes->at(1).unschedulable = false;
         t.now = t0 + 890s;  // 589 s after the resize
       },
       Case::kRunning, "Running", kEnsure, {}, milliseconds(11s)},
      {"CapacityBackGrowsToTheDesiredSize",
       [](Input& t) {
         RunningOnOne(t);
         t.in.cluster_nodes->at(1).unschedulable = false;
         t.now = t0 + 901s;
       },
       Case::kResized, "Restarting", {"create Service j", "create ConfigMap j-config", "delete Pod j-node-0"},
       {"Resized"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->current_nodes, 2);
         EXPECT_EQ(p.status->restart_attempt, 2);
         EXPECT_EQ(p.status->world_size, 4);
         EXPECT_THAT(Cond(p, api::kCondRestarting).message,
                     HasSubstr("resized from 1 to 2 nodes: 2 nodes of 2: 2 nodes can host a pod again"));
         ASSERT_EQ(p.status->elastic.history.size(), 3u);
         EXPECT_EQ(p.status->elastic.history[1].to_step, 55);
         EXPECT_EQ(p.status->elastic.history[2].nodes, 2);
         EXPECT_EQ(p.status->elastic.last_resize_time, At(901s));
       }},
      {"AGangRestartBelowDesiredTakesTheCapacityThereIs",
       [](Input& t) {
         RunningOnOne(t);
         t.in.cluster_nodes->at(1).unschedulable = false;
         Fail(t.pod(0), 137, At(399s));
         t.now = t0 + 400s;  // well within minResizeIntervalSeconds: the gang restarts anyway
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0"}, {"PodFailed", "Resized"}, std::nullopt,
       [](const Plan& p, const Input&) {
         EXPECT_EQ(p.status->current_nodes, 2);
         EXPECT_EQ(p.status->restart_count, 1);
       }},
      {"AGangRestartWithoutCapacityStaysSmall",
       [](Input& t) {
         RunningOnOne(t);
         Fail(t.pod(0), 137, At(399s));
       },
       Case::kFault, "Restarting", {"delete Pod j-node-0"}, {"PodFailed"}, std::nullopt,
       [](const Plan& p, const Input&) { EXPECT_EQ(p.status->current_nodes, 1); }},
  };
}

class ElasticRowsTest : public ::testing::TestWithParam<Row> {};
TEST_P(ElasticRowsTest, Decide) { CheckRow(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Elastic, ElasticRowsTest, ::testing::ValuesIn(ElasticRows()), RowName);

// The step range of the current size follows the attempt's progress reports.
TEST(ElasticHistory, StepRangeStartsAtTheResumedCheckpoint) {
  Input t;
  RunningOnOne(t);
  t.in.status.elastic.history.back().from_step.reset();
  t.in.status.elastic.history.back().to_step.reset();
  t.in.progress = R"({"step": 47, "lastCheckpointStep": 40})";
  const Plan plan = t.Decide();
  ASSERT_EQ(plan.status->elastic.history.size(), 2u);
  EXPECT_EQ(plan.status->elastic.history[1].from_step, 40);
  EXPECT_EQ(plan.status->elastic.history[1].to_step, 47);
}

}  // namespace
}  // namespace hypertrain::controller
