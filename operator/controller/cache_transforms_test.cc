// The informer caches keep every field the reconciler reads and drop the rest:
// a trimmed pod or node reads (PodFromJson, NodeFromJson) exactly as the whole
// object does, and a built trainer pod shrinks to a fraction of its size.
#include "operator/controller/cache_transforms.h"

#include <gtest/gtest.h>

#include "operator/controller/builders.h"
#include "operator/controller/observed.h"
#include "operator/controller/plan_testing.h"

namespace hypertrain::controller {
namespace {

using kube::Json;

bool SamePod(const ObservedPod& a, const ObservedPod& b) {
  return a.name == b.name && a.uid == b.uid && a.node_rank == b.node_rank && a.restart_attempt == b.restart_attempt &&
         a.phase == b.phase && a.deleting == b.deleting && a.node_name == b.node_name && a.gated == b.gated &&
         a.unschedulable_message == b.unschedulable_message && a.fault == b.fault &&
         a.final_in_group == b.final_in_group;
}

// A trainer pod as the operator builds it, then as the kubelet reports it.
Json ServedPod(const std::string& phase) {
  api::ObjectMeta job = plantest::JobMeta();
  auto pod = BuildPod(job, plantest::ParsedSpec(plantest::SpecJson()), PodOptions{1, 2, {}, 2, ""});
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  Json p = pod.ok() ? *pod : Json::object();
  p["metadata"]["uid"] = "pod-uid";
  p["metadata"]["resourceVersion"] = "42";
  p["metadata"]["annotations"]["kueue.x-k8s.io/retriable-in-group"] = "false";
  p["metadata"]["managedFields"] = Json::array({{{"manager", "x"}, {"fieldsV1", {{"f:spec", Json::object()}}}}});
  p["spec"]["nodeName"] = "node-b";
  p["spec"]["schedulingGates"] = Json::array({{{"name", "kueue.x-k8s.io/admission"}}});
  p["status"] = {{"phase", phase},
                 {"reason", "Evicted"},
                 {"message", "the node was low on memory"},
                 {"hostIP", "10.0.0.2"},
                 {"conditions", Json::array({{{"type", "PodScheduled"}, {"status", "False"}, {"message", "0/4 nodes"}}})},
                 {"containerStatuses",
                  Json::array({{{"name", "trainer"},
                                {"image", "hypertrain:test"},
                                {"imageID", "sha256:abc"},
                                {"state",
                                 {{"terminated",
                                   {{"exitCode", 137},
                                    {"reason", "OOMKilled"},
                                    {"message", "rank 1 was killed"},
                                    {"finishedAt", "2027-01-15T08:01:00Z"}}}}}}})}};
  return p;
}

TEST(CacheTransformsTest, TrimmedPodReadsTheSameAndIsSmall) {
  for (const char* phase : {"Failed", "Running", "Pending"}) {
    Json full = ServedPod(phase);
    Json trimmed = full;
    TrimPod(trimmed);
    EXPECT_TRUE(SamePod(PodFromJson(full), PodFromJson(trimmed))) << trimmed.dump(2);
    // Without the eviction reason the container's exit is what is read.
    full["status"].erase("reason");
    trimmed["status"].erase("reason");
    EXPECT_TRUE(SamePod(PodFromJson(full), PodFromJson(trimmed))) << phase;
    EXPECT_EQ(PodFromJson(trimmed).fault.exit_code, 137);
    EXPECT_FALSE(trimmed.contains("apiVersion") && trimmed["spec"].contains("containers"));
    EXPECT_FALSE(trimmed["metadata"].contains("managedFields"));
    EXPECT_EQ(trimmed["metadata"]["ownerReferences"], full["metadata"]["ownerReferences"]);
    EXPECT_EQ(trimmed["metadata"]["labels"], full["metadata"]["labels"]);
    EXPECT_LT(trimmed.dump().size() * 3, full.dump().size()) << trimmed.dump().size() << " of " << full.dump().size();
  }
}

TEST(CacheTransformsTest, TrimmedNodeReadsTheSameWithoutHeartbeats) {
  Json full = {{"metadata",
                {{"name", "node-a"},
                 {"uid", "n1"},
                 {"resourceVersion", "7"},
                 {"labels", {{"sagemaker.amazonaws.com/node-health-status", "Schedulable"}}},
                 {"annotations", {{"csi.volume.kubernetes.io/nodeid", "{...}"}}},
                 {"managedFields", Json::array()}}},
               {"spec",
                {{"unschedulable", true},
                 {"providerID", "aws:///i-1"},
                 {"taints", Json::array({{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}})}}},
               {"status",
                {{"conditions",
                  Json::array({{{"type", "Ready"},
                                {"status", "False"},
                                {"lastHeartbeatTime", "2027-01-15T08:00:10Z"},
                                {"lastTransitionTime", "2027-01-15T08:00:00Z"}}})},
                 {"allocatable", {{"nvidia.com/gpu", "8"}}},
                 {"images", Json::array({{{"names", {"a", "b"}}, {"sizeBytes", 1}}})},
                 {"nodeInfo", {{"kubeletVersion", "v1.26.5"}}}}}};
  Json trimmed = full;
  TrimNode(trimmed);
  const ObservedNode a = NodeFromJson(full), b = NodeFromJson(trimmed);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.not_ready_since, b.not_ready_since);
  EXPECT_EQ(a.unschedulable, b.unschedulable);
  EXPECT_EQ(a.taints, b.taints);
  EXPECT_EQ(a.allocatable, b.allocatable);
  EXPECT_FALSE(trimmed["status"].contains("images"));
  EXPECT_FALSE(trimmed["status"]["conditions"][0].contains("lastHeartbeatTime"));
  EXPECT_EQ(trimmed["metadata"]["resourceVersion"], "7");
}

TEST(CacheTransformsTest, MetadataOnlyKeepsOwnership) {
  Json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "Role"},
               {"metadata",
                {{"name", "j-progress"},
                 {"namespace", "ns"},
                 {"uid", "r1"},
                 {"resourceVersion", "3"},
                 {"ownerReferences", Json::array({{{"uid", "job-uid"}, {"controller", true}}})},
                 {"managedFields", Json::array()}}},
               {"rules", Json::array({{{"verbs", {"patch"}}}})}};
  KeepMetadataOnly(role);
  EXPECT_FALSE(role.contains("rules"));
  EXPECT_FALSE(role["metadata"].contains("managedFields"));
  EXPECT_EQ(role["metadata"]["ownerReferences"][0]["uid"], "job-uid");
  EXPECT_EQ(role["kind"], "Role");
}

}  // namespace
}  // namespace hypertrain::controller
