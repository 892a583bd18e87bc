// The elastic node-count arithmetic: which nodes can host a pod, the size
// after a scheduling timeout and when capacity returns, the size history.
#include "operator/controller/elastic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hypertrain::controller {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

api::ObjectMeta Meta() {
  api::ObjectMeta m;
  m.name = "j";
  m.namespace_ = "ns";
  return m;
}

// `nodes` x ml.p5.48xlarge (8 GPUs, 32 EFA), elastic from `min`, 60 s timeout.
api::TrainingJobSpec Spec(int nodes, int min, json extra = json::object()) {
  json s = {{"image", "x"},
            {"instanceType", "ml.p5.48xlarge"},
            {"nodes", nodes},
            {"runPolicy", {{"schedulingTimeoutSeconds", 60}}},
            {"elastic", {{"minNodes", min}}},
            {"trainerConfig", {{"inline", "trainer: {}\nmodel: {}\n"}}}};
  s.update(extra);
  auto spec = api::ParseSpec(s, Meta());
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : api::TrainingJobSpec{};
}

ObservedNode P5(const std::string& name) {
  ObservedNode n;
  n.name = name;
  n.labels = {{api::kInstanceTypeLabel, "ml.p5.48xlarge"}, {api::kHyperPodHealthLabel, "Schedulable"}};
  n.allocatable = {{"nvidia.com/gpu", "8"}, {"vpc.amazonaws.com/efa", "32"}, {"cpu", "192"}};
  return n;
}

TEST(NodeHostProblem, EachReasonANodeCannotHostAPod) {
  const api::TrainingJobSpec spec = Spec(4, 1);
  EXPECT_EQ(NodeHostProblem(spec, P5("a"), {}), "");
  ObservedNode n = P5("a");
  n.not_ready_since = "2027-01-01T00:00:00Z";
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "NotReady");
  n = P5("a");
  n.unschedulable = true;
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "cordoned (spec.unschedulable)");
  EXPECT_EQ(NodeHostProblem(spec, P5("a"), {"b", "a"}), "in status.excludedNodes");
  n = P5("a");
  n.labels[api::kInstanceTypeLabel] = "ml.p4d.24xlarge";
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "node.kubernetes.io/instance-type=ml.p4d.24xlarge, the pods select ml.p5.48xlarge");
  n = P5("a");
  n.labels[api::kHyperPodHealthLabel] = "UnschedulablePendingReboot";
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReboot");
  n = P5("a");
  n.allocatable["nvidia.com/gpu"] = "4";
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "allocatable nvidia.com/gpu 4 < 8");
  n = P5("a");
  n.allocatable.erase("vpc.amazonaws.com/efa");
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "allocatable vpc.amazonaws.com/efa 0 < 32");
  n = P5("a");
  n.taints = {{"nvidia.com/gpu", "", "NoSchedule"}};
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "taint nvidia.com/gpu=:NoSchedule");
  n.taints = {{"dedicated", "ml", "PreferNoSchedule"}};  // only a preference
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "");

  const api::TrainingJobSpec required = Spec(4, 1, {{"faultPolicy", {{"deepHealthCheck", "Required"}}}});
  EXPECT_THAT(NodeHostProblem(required, P5("a"), {}), HasSubstr("deep-health-check-status=<none>"));
  n = P5("a");
  n.labels[api::kDeepHealthLabel] = "Passed";
  EXPECT_EQ(NodeHostProblem(required, n, {}), "");
}

TEST(NodeHostProblem, TolerationsAndSelectorsAsTheScheduler) {
  const api::TrainingJobSpec spec =
      Spec(4, 1, {{"scheduling", {{"nodeSelector", {{"pool", "train"}}},
                                  {"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}},
                                                               {{"key", "team"}, {"value", "a"}, {"effect", "NoSchedule"}}})}}}});
  ObservedNode n = P5("a");
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "pool=<none>, the pods select train");
  n.labels["pool"] = "train";
  n.taints = {{"nvidia.com/gpu", "present", "NoSchedule"}, {"team", "a", "NoSchedule"}};
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "");
  n.taints = {{"team", "b", "NoSchedule"}};
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "taint team=b:NoSchedule");
  n.taints = {{"team", "a", "NoExecute"}};  // the toleration names NoSchedule only
  EXPECT_EQ(NodeHostProblem(spec, n, {}), "taint team=a:NoExecute");
}

TEST(CountHosts, CountsAndNamesTheFirstThatCannot) {
  const api::TrainingJobSpec spec = Spec(4, 1);
  std::vector<ObservedNode> nodes = {P5("a"), P5("b"), P5("c")};
  nodes[1].unschedulable = true;
  const Capacity c = CountHosts(spec, nodes, {"c"});
  EXPECT_EQ(c.hosts, 1);
  EXPECT_EQ(c.example, "node b: cordoned (spec.unschedulable)");
  EXPECT_EQ(CountHosts(spec, {P5("a")}, {}).example, "");
}

// A gang of `n` pods of which the first `bound` have a node.
struct TestGang {
  std::vector<ObservedPod> pods;
  Gang gang;
  TestGang(int n, int bound) : pods(n) {
    for (int r = 0; r < n; ++r) {
      pods[r].name = "j-node-" + std::to_string(r);
      if (r < bound) pods[r].node_name = "n" + std::to_string(r);
    }
    for (int r = 0; r < n; ++r) gang[r] = &pods[r];
  }
};

TEST(SizeAfterTimeout, PlainPodsShrinkToWhatTheSchedulerPlaced) {
  const api::TrainingJobSpec spec = Spec(4, 1);  // sizes 1, 2, 4
  TestGang g(4, 3);
  auto next = SizeAfterTimeout(spec, 4, g.gang, std::nullopt, {});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->nodes, 2);  // 3 placed; 3 does not keep the batch
  EXPECT_EQ(next->reason, "2 nodes of 4: the gang of 4 was not all Running within schedulingTimeoutSeconds=60; "
                          "3 of 4 pods were placed");
  TestGang one(4, 1);
  EXPECT_EQ(SizeAfterTimeout(spec, 4, one.gang, std::nullopt, {})->nodes, 1);
  TestGang none(2, 0);  // nothing placed: the smallest size, minNodes
  EXPECT_EQ(SizeAfterTimeout(spec, 2, none.gang, std::nullopt, {})->nodes, 1);
}

TEST(SizeAfterTimeout, GangProvidersCountTheNodesThatCanHostAPod) {
  const api::TrainingJobSpec spec = Spec(4, 1, {{"scheduling", {{"gang", {{"provider", "volcano"}}}}}});
  TestGang g(4, 0);
  std::vector<ObservedNode> nodes = {P5("a"), P5("b"), P5("c"), P5("d")};
  nodes[3].labels[api::kHyperPodHealthLabel] = "Unschedulable";
  auto next = SizeAfterTimeout(spec, 4, g.gang, nodes, {});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->nodes, 2);
  EXPECT_THAT(next->reason, HasSubstr("3 nodes can host a pod (node d: sagemaker.amazonaws.com/node-health-status="
                                      "Unschedulable)"));
  // Every node looks free (another tenant's pods hold them): one size less.
  nodes[3] = P5("d");
  EXPECT_EQ(SizeAfterTimeout(spec, 4, g.gang, nodes, {})->nodes, 2);
  EXPECT_EQ(SizeAfterTimeout(spec, 2, TestGang(2, 0).gang, nodes, {})->nodes, 1);
  // No node information: one size less.
  EXPECT_EQ(SizeAfterTimeout(spec, 4, g.gang, std::nullopt, {})->nodes, 2);
}

TEST(SizeAfterTimeout, AtMinNodesOrNotElasticTheRetryPolicyDecides) {
  TestGang g(2, 1);
  EXPECT_FALSE(SizeAfterTimeout(Spec(2, 2), 2, g.gang, std::nullopt, {}));
  EXPECT_FALSE(SizeAfterTimeout(Spec(4, 1), 1, TestGang(1, 0).gang, std::nullopt, {}));
  api::TrainingJobSpec fixed = Spec(2, 1);
  fixed.elastic.reset();
  EXPECT_FALSE(SizeAfterTimeout(fixed, 2, g.gang, std::nullopt, {}));
}

TEST(SizeToGrow, GrowsToTheLargestSizeTheHostsCover) {
  const api::TrainingJobSpec spec = Spec(4, 1);
  std::vector<ObservedNode> nodes = {P5("a"), P5("b"), P5("c")};
  auto grow = SizeToGrow(spec, 1, nodes, {});
  ASSERT_TRUE(grow);
  EXPECT_EQ(grow->nodes, 2);
  EXPECT_EQ(grow->reason, "2 nodes of 4: 3 nodes can host a pod again");
  EXPECT_FALSE(SizeToGrow(spec, 2, nodes, {}));  // 3 hosts, 4 is the next size
  nodes.push_back(P5("d"));
  EXPECT_EQ(SizeToGrow(spec, 2, nodes, {})->nodes, 4);
  EXPECT_FALSE(SizeToGrow(spec, 2, nodes, {"d"}));  // an excluded node does not count
  EXPECT_FALSE(SizeToGrow(spec, 4, nodes, {}));     // at maxNodes
  auto probe = SizeToGrow(spec, 1, std::nullopt, {});
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->nodes, 4);
  EXPECT_THAT(probe->reason, HasSubstr("no node information: trying maxNodes 4"));
}

TEST(SizeToGrow, MaxNodesAboveNodesUsesSpareCapacity) {
  const api::TrainingJobSpec spec =
      Spec(2, 1, {{"elastic", {{"minNodes", 1}, {"maxNodes", 4}}},
                  {"trainerConfig", {{"inline", "trainer: {}\nmodel: {grad_accumulation_steps: 2}\n"}}}});
  ASSERT_TRUE(spec.elastic);
  EXPECT_EQ(spec.elastic->sizes, (std::vector<int32_t>{1, 2, 4}));
  std::vector<ObservedNode> nodes = {P5("a"), P5("b"), P5("c"), P5("d"), P5("e")};
  EXPECT_EQ(SizeToGrow(spec, 2, nodes, {})->nodes, 4);
}

TEST(SizeHistory, EntriesAndStepRanges) {
  api::TrainingJobStatus s;
  StartSizeHistory(&s, 2, "t0");
  StartSizeHistory(&s, 2, "t9");  // only when empty
  ASSERT_EQ(s.elastic.history.size(), 1u);
  EXPECT_EQ(s.elastic.history[0].reason, "the desired size (spec.nodes)");
  TrackSizeSteps(&s, api::Progress{10, {}, {}, {}, {}, ""});  // fresh start: from step 0
  TrackSizeSteps(&s, api::Progress{42, {}, {}, {}, 40, ""});
  EXPECT_EQ(s.elastic.history[0].from_step, 0);
  EXPECT_EQ(s.elastic.history[0].to_step, 42);
  RecordResize(&s, SizeChoice{1, "1 node of 2: ..."}, "t1");
  EXPECT_EQ(s.current_nodes, 1);
  EXPECT_EQ(s.elastic.last_resize_time, "t1");
  ASSERT_EQ(s.elastic.history.size(), 2u);
  EXPECT_FALSE(s.elastic.history[1].from_step);
  TrackSizeSteps(&s, api::Progress{43, {}, {}, {}, 40, ""});  // resumed from the checkpoint of step 40
  EXPECT_EQ(s.elastic.history[1].from_step, 40);
  EXPECT_EQ(s.elastic.history[1].to_step, 43);
  for (int i = 0; i < 40; ++i) RecordResize(&s, SizeChoice{2, "r" + std::to_string(i)}, "t");
  EXPECT_EQ(s.elastic.history.size(), api::kMaxSizeHistory);
  EXPECT_EQ(s.elastic.history.back().reason, "r39");
}

}  // namespace
}  // namespace hypertrain::controller
