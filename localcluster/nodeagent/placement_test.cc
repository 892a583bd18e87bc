#include "localcluster/nodeagent/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "contract/pod.h"

namespace hypertrain::nodeagent {
namespace {

using ::testing::HasSubstr;

Json Node(const std::string& name, const std::string& domain, int gpus = 1) {
  return {{"metadata",
           {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}, {"topology.k8s.aws/network-node-layer-3", domain}}}}},
          {"status", {{"allocatable", {{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "16"}, {"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

Json Pod(const std::string& name, int rank, int gpus = 1, const std::string& node = "") {
  Json pod = {{"metadata",
               {{"name", name},
                {"namespace", "ns"},
                {"labels", {{contract::kLabelJobName, "j"}, {contract::kLabelNodeRank, std::to_string(rank)}}}}},
              {"spec", {{"containers", {{{"name", "trainer"}, {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}},
              {"status", {{"phase", node.empty() ? "Pending" : "Running"}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return pod;
}

Json SameDomain(Json pod) {
  pod["spec"]["affinity"] = {{"podAffinity",
                              {{"requiredDuringSchedulingIgnoredDuringExecution",
                                {{{"labelSelector", {{"matchLabels", {{contract::kLabelJobName, "j"}}}}},
                                  {"topologyKey", "topology.k8s.aws/network-node-layer-3"}}}}}}};
  return pod;
}

// nodes a and c share network node nn-1, b is alone under nn-2.
std::vector<Json> Nodes() { return {Node("a", "nn-1"), Node("b", "nn-2"), Node("c", "nn-1")}; }

TEST(PlacementTest, SpreadsByFewestPodsAndAccountsWhatItPlaces) {
  Placement p(Nodes(), {Pod("x", 0, 1, "a")});
  std::string why;
  EXPECT_EQ(p.Pick(Pod("j-0", 0), &why), "b");
  p.Place(Pod("j-0", 0), "b");
  EXPECT_EQ(p.Pick(Pod("j-1", 1), &why), "c");
  p.Place(Pod("j-1", 1), "c");
  EXPECT_EQ(p.Pick(Pod("j-2", 2), &why), "");
  EXPECT_THAT(why, HasSubstr("a: insufficient nvidia.com/gpu"));
}

TEST(PlacementTest, RequiredPodAffinityKeepsTheGroupUnderOneDomain) {
  Placement p(Nodes(), {});
  std::string why;
  // The first pod of the group goes anywhere (it matches its own term).
  EXPECT_EQ(p.Pick(SameDomain(Pod("j-0", 0)), &why), "a");
  p.Place(SameDomain(Pod("j-0", 0)), "a");
  // Spreading alone would pick b; affinity says nn-1, so c.
  EXPECT_EQ(p.Pick(SameDomain(Pod("j-1", 1)), &why), "c");
  p.Place(SameDomain(Pod("j-1", 1)), "c");
  why.clear();
  EXPECT_EQ(p.Pick(SameDomain(Pod("j-2", 2)), &why), "");
  EXPECT_THAT(why, HasSubstr("b: pod affinity (topology.k8s.aws/network-node-layer-3)"));
}

TEST(PlacementTest, RequiredPodAntiAffinity) {
  Json pod = Pod("k-0", 0);
  pod["spec"]["affinity"] = {{"podAntiAffinity",
                              {{"requiredDuringSchedulingIgnoredDuringExecution",
                                {{{"labelSelector", {{"matchExpressions", {{{"key", contract::kLabelJobName}, {"operator", "Exists"}}}}}},
                                  {"topologyKey", "topology.k8s.aws/network-node-layer-3"}}}}}}};
  Placement p({Node("a", "nn-1", 2), Node("b", "nn-2", 2), Node("c", "nn-1", 2)}, {Pod("x", 0, 1, "a")});
  std::string why;
  EXPECT_EQ(p.Pick(pod, &why), "b");
}

TEST(PlacementTest, PlaceAllIsAllOrNothing) {
  Placement p(Nodes(), {Pod("x", 0, 1, "a")});
  std::vector<Json> gang = {Pod("g-0", 0), Pod("g-1", 1), Pod("g-2", 2)};
  std::vector<const Json*> members = {&gang[0], &gang[1], &gang[2]};
  std::string why;
  EXPECT_TRUE(p.PlaceAll(members, &why).empty());
  EXPECT_THAT(why, HasSubstr("g-2: "));
  // Nothing was placed by the failed attempt: two of them still fit.
  members.pop_back();
  EXPECT_EQ(p.PlaceAll(members, &why), (std::vector<std::string>{"b", "c"}));
}

TEST(PlacementTest, SelectorsGangsAndGates) {
  Json labels = {{"app", "x"}, {"tier", "db"}};
  EXPECT_TRUE(SelectorMatches({{"matchLabels", {{"app", "x"}}}}, labels));
  EXPECT_FALSE(SelectorMatches({{"matchLabels", {{"app", "y"}}}}, labels));
  EXPECT_TRUE(SelectorMatches({{"matchExpressions", {{{"key", "tier"}, {"operator", "In"}, {"values", {"db", "web"}}}}}}, labels));
  EXPECT_FALSE(SelectorMatches({{"matchExpressions", {{{"key", "tier"}, {"operator", "DoesNotExist"}}}}}, labels));
  EXPECT_FALSE(SelectorMatches(Json(), labels));

  Json pod = Pod("p", 0);
  EXPECT_TRUE(GangOf(pod).name.empty());
  pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "pg";
  EXPECT_EQ(GangOf(pod).api_version, "scheduling.x-k8s.io/v1alpha1");
  EXPECT_EQ(GangOf(pod).key(), "ns/scheduling.x-k8s.io/v1alpha1/pg");
  Json volcano = Pod("v", 0);
  volcano["metadata"]["annotations"] = {{"scheduling.k8s.io/group-name", "vg"}};
  EXPECT_EQ(GangOf(volcano).api_version, "scheduling.volcano.sh/v1beta1");

  EXPECT_FALSE(Gated(pod));
  pod["spec"]["schedulingGates"] = {{{"name", kKueueGate}}, {{"name", "other"}}};
  EXPECT_TRUE(Gated(pod));
  EXPECT_TRUE(HasGate(pod, kKueueGate));
  EXPECT_EQ(GatesWithout(pod, kKueueGate), Json::parse(R"([{"name": "other"}])"));
}

}  // namespace
}  // namespace hypertrain::nodeagent
