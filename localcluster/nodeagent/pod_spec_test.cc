#include "localcluster/nodeagent/pod_spec.h"

#include <gtest/gtest.h>

namespace hypertrain::nodeagent {
namespace {

Json Node(Json labels, Json taints = Json::array(), Json alloc = {{"cpu", "4"}, {"nvidia.com/gpu", "8"}, {"pods", "10"}}) {
  return {{"metadata", {{"name", "n"}, {"labels", labels}}},
          {"spec", {{"taints", taints}}},
          {"status", {{"allocatable", alloc}}}};
}

TEST(Quantity, Parses) {
  EXPECT_DOUBLE_EQ(*ParseQuantity("2"), 2);
  EXPECT_DOUBLE_EQ(*ParseQuantity("500m"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseQuantity("1Gi"), 1073741824.0);
  EXPECT_DOUBLE_EQ(*ParseQuantity("16G"), 16e9);
  EXPECT_FALSE(ParseQuantity("").has_value());
  EXPECT_FALSE(ParseQuantity("abc").has_value());
  EXPECT_FALSE(ParseQuantity("3Xi").has_value());
}

TEST(Scheduling, SelectorAffinityTaintsCapacity) {
  Json pod = {{"spec",
               {{"nodeSelector", {{"node.kubernetes.io/instance-type", "ml.p5.48xlarge"}}},
                {"affinity",
                 {{"nodeAffinity",
                   {{"requiredDuringSchedulingIgnoredDuringExecution",
                     {{"nodeSelectorTerms",
                       Json::array({{{"matchExpressions",
                                      Json::array({{{"key", "health"}, {"operator", "In"}, {"values", {"Schedulable"}}},
                                                   {{"key", "kubernetes.io/hostname"},
                                                    {"operator", "NotIn"},
                                                    {"values", {"bad"}}},
                                                   {{"key", "gone"}, {"operator", "DoesNotExist"}}})}}})}}}}}}},
                {"containers",
                 Json::array({{{"resources",
                                {{"requests", {{"cpu", "1500m"}}}, {"limits", {{"nvidia.com/gpu", "8"}}}}}}})}}}};
  std::string why;
  Json good = Node({{"node.kubernetes.io/instance-type", "ml.p5.48xlarge"},
                    {"health", "Schedulable"},
                    {"kubernetes.io/hostname", "ok"}});
  EXPECT_TRUE(MatchesNode(pod, good, &why)) << why;
  Json other_type = good;
  other_type["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "ml.g5.48xlarge";
  EXPECT_FALSE(MatchesNode(pod, other_type, &why));
  EXPECT_NE(why.find("nodeSelector"), std::string::npos);
  Json unhealthy = good;
  unhealthy["metadata"]["labels"]["health"] = "UnschedulablePendingReboot";
  EXPECT_FALSE(MatchesNode(pod, unhealthy, &why));
  Json excluded = good;
  excluded["metadata"]["labels"]["kubernetes.io/hostname"] = "bad";
  EXPECT_FALSE(MatchesNode(pod, excluded, &why));
  Json has_gone = good;
  has_gone["metadata"]["labels"]["gone"] = "x";
  EXPECT_FALSE(MatchesNode(pod, has_gone, &why));

  Json tainted = Node({}, Json::array({{{"key", "sagemaker.amazonaws.com/node-health-status"},
                                         {"value", "Unschedulable"},
                                         {"effect", "NoSchedule"}}}));
  EXPECT_FALSE(ToleratesTaints(pod, tainted, &why));
  EXPECT_NE(why.find("node-health-status"), std::string::npos);
  Json tolerant = pod;
  tolerant["spec"]["tolerations"] = Json::array({{{"key", "sagemaker.amazonaws.com/node-health-status"},
                                                  {"operator", "Exists"}}});
  EXPECT_TRUE(ToleratesTaints(tolerant, tainted, &why));
  Json prefer = Node({}, Json::array({{{"key", "x"}, {"effect", "PreferNoSchedule"}}}));
  EXPECT_TRUE(ToleratesTaints(pod, prefer, &why));

  auto req = PodRequests(pod);
  EXPECT_DOUBLE_EQ(req["cpu"], 1.5);
  EXPECT_DOUBLE_EQ(req["nvidia.com/gpu"], 8);
  EXPECT_DOUBLE_EQ(req["pods"], 1);
  EXPECT_TRUE(Fits(req, {}, good, &why)) << why;
  EXPECT_FALSE(Fits(req, {{"nvidia.com/gpu", 1}}, good, &why));
  EXPECT_EQ(why, "insufficient nvidia.com/gpu");
  EXPECT_FALSE(Fits(req, {{"cpu", 3}}, good, &why));
}

TEST(Process, EnvDnsVolumesAndImage) {
  Json pod = {
      {"metadata", {{"name", "job-node-1"}, {"namespace", "team"}, {"uid", "u1"}, {"labels", {{"job", "j"}}}}},
      {"spec",
       {{"nodeName", "local-node-1"},
        {"volumes", Json::array({{{"name", "cfg"}, {"configMap", {{"name", "job-config"},
                                                                  {"items", Json::array({{{"key", "config.yaml"},
                                                                                          {"path", "config.yaml"}}})}}}},
                                 {{"name", "shm"}, {"emptyDir", {{"medium", "Memory"}}}},
                                 {{"name", "scratch"}, {"emptyDir", Json::object()}}})},
        {"containers",
         Json::array({{{"name", "trainer"},
                       {"image", "hypertrain:local"},
                       {"command", {"hypertrain", "launch", "--nproc-per-node", "$(NPROC_PER_NODE)", "--", "train",
                                    "--config", "/etc/hypertrain/config.yaml"}},
                       {"env", Json::array({{{"name", "NPROC_PER_NODE"}, {"value", "2"}},
                                            {{"name", "MASTER_ADDR"}, {"value", "job-node-0.job.team.svc"}},
                                            {{"name", "HYPERTRAIN_CONFIG"}, {"value", "/etc/hypertrain/config.yaml"}},
                                            {{"name", "SCRATCH"}, {"value", "/scratch"}},
                                            {{"name", "POD"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                                            {{"name", "NODE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
                                            {{"name", "JOB"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['job']"}}}}}},
                                            {{"name", "DESC"}, {"value", "pod $(POD) on $(NODE), $$(literal)"}}})},
                       {"volumeMounts", Json::array({{{"name", "cfg"}, {"mountPath", "/etc/hypertrain"}},
                                                     {{"name", "shm"}, {"mountPath", "/dev/shm"}},
                                                     {{"name", "scratch"}, {"mountPath", "/scratch"}}})}}})}}}};
  std::map<std::string, Json> cms = {{"job-config", {{"data", {{"config.yaml", "trainer: {}\n"}}}}}};
  ProcessOptions po;
  po.pod_dir = "/w/p";
  po.image_map = {{"hypertrain:local", "/bin/hypertrain"}};
  po.extra_env = {{"KUBECONFIG", "/k"}};
  ProcessSpec ps;
  std::string err;
  ASSERT_TRUE(BuildProcess(pod, cms, po, &ps, &err)) << err;
  EXPECT_EQ(ps.argv, (std::vector<std::string>{"/bin/hypertrain", "launch", "--nproc-per-node", "2", "--", "train",
                                               "--config", "/w/p/volumes/cfg/config.yaml"}));
  auto has = [&](const std::string& kv) {
    return std::find(ps.env.begin(), ps.env.end(), kv) != ps.env.end();
  };
  EXPECT_TRUE(has("MASTER_ADDR=127.0.0.1"));
  EXPECT_TRUE(has("HYPERTRAIN_CONFIG=/w/p/volumes/cfg/config.yaml"));
  EXPECT_TRUE(has("SCRATCH=/w/p/volumes/scratch"));
  EXPECT_TRUE(has("POD=job-node-1"));
  EXPECT_TRUE(has("NODE=local-node-1"));
  EXPECT_TRUE(has("JOB=j"));
  EXPECT_TRUE(has("DESC=pod job-node-1 on local-node-1, $(literal)"));
  EXPECT_TRUE(has("KUBECONFIG=/k"));
  ASSERT_EQ(ps.volumes.size(), 3u);
  EXPECT_EQ(ps.volumes[0].files.at("config.yaml"), "trainer: {}\n");

  // Bad inputs give clear errors.
  Json no_image = pod;
  no_image["spec"]["containers"][0]["image"] = "other:1";
  EXPECT_FALSE(BuildProcess(no_image, cms, po, &ps, &err));
  EXPECT_NE(err.find("--image-map"), std::string::npos);
  EXPECT_FALSE(BuildProcess(pod, {}, po, &ps, &err));
  EXPECT_NE(err.find("ConfigMap job-config not found"), std::string::npos);
}

TEST(Process, ClusterDnsNames) {
  EXPECT_TRUE(IsClusterDnsName("a-node-0.a.ns.svc"));
  EXPECT_TRUE(IsClusterDnsName("a.ns.svc.cluster.local"));
  EXPECT_FALSE(IsClusterDnsName("10.0.0.1"));
  EXPECT_FALSE(IsClusterDnsName("http://x.svc"));
  EXPECT_FALSE(IsClusterDnsName(".svc"));
}

}  // namespace
}  // namespace hypertrain::nodeagent
