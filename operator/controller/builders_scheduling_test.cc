// The pod shape of gang admission, topology, deep health and spec.podTemplate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kConfig[] = "trainer:\n  max_steps: 100\nmodel:\n  sharding_strategy: hybrid_shard\n";

api::ObjectMeta Meta() {
  api::ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  m.uid = "0b7c94e1-uid";
  return m;
}

json BaseSpec(json scheduling = json::object()) {
  return {{"image", "hypertrain:1"},
          {"instanceType", "ml.p5.48xlarge"},
          {"nodes", 4},
          {"trainerConfig", {{"inline", kConfig}}},
          {"scheduling", scheduling}};
}

api::TrainingJobSpec Spec(const json& j) {
  auto r = api::ParseSpec(j, Meta());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : api::TrainingJobSpec{};
}

json Pod(const json& spec, int rank = 0, int attempt = 0) {
  auto pod = BuildPod(Meta(), Spec(spec), PodOptions{rank, attempt, {}});
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  return pod.ok() ? *pod : json();
}

TEST(GangPodTest, NoProviderMeansPlainPods) {
  json pod = Pod(BaseSpec());
  EXPECT_FALSE(pod["spec"].contains("schedulingGates"));
  EXPECT_FALSE(pod["spec"].contains("schedulerName"));
  EXPECT_FALSE(pod["metadata"]["labels"].contains("kueue.x-k8s.io/queue-name"));
  EXPECT_TRUE(BuildPodGroup(Meta(), Spec(BaseSpec())).is_null());
}

TEST(GangPodTest, KueuePodGroupIntegration) {
  json pod = Pod(BaseSpec({{"gang", {{"provider", "kueue"}, {"queueName", "team-a-queue"}, {"priorityClass", "high"}}}}), 2);
  const json& labels = pod["metadata"]["labels"];
  EXPECT_EQ(labels["kueue.x-k8s.io/queue-name"], "team-a-queue");
  EXPECT_EQ(labels["kueue.x-k8s.io/priority-class"], "high");
  EXPECT_EQ(labels["kueue.x-k8s.io/pod-group-name"], "llama-0b7c94e1");
  const json& annotations = pod["metadata"]["annotations"];
  EXPECT_EQ(annotations["kueue.x-k8s.io/pod-group-total-count"], "4");
  EXPECT_EQ(annotations["kueue.x-k8s.io/pod-group-pod-index-label"], "hypertrain.dev/node-rank");
  EXPECT_EQ(labels["hypertrain.dev/node-rank"], "2");
  EXPECT_EQ(pod["spec"]["schedulingGates"], json::parse(R"([{"name": "kueue.x-k8s.io/admission"}])"));
  EXPECT_FALSE(pod["spec"].contains("schedulerName"));
  // Kueue builds its own Workload from the pods: no PodGroup object.
  EXPECT_TRUE(BuildPodGroup(Meta(), Spec(BaseSpec({{"gang", {{"provider", "kueue"}, {"queueName", "q"}}}}))).is_null());
}

TEST(GangPodTest, KueueTopologyIsKueuesTopologyAwareScheduling) {
  json spec = BaseSpec({{"gang", {{"provider", "kueue"}, {"queueName", "q"}}}, {"topology", {{"layer", 2}}}});
  json pod = Pod(spec, 1);
  EXPECT_EQ(pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"],
            "topology.k8s.aws/network-node-layer-2");
  EXPECT_FALSE(pod["spec"]["affinity"].contains("podAffinity"));  // Kueue places the gang
  spec["scheduling"]["topology"]["mode"] = "Preferred";
  EXPECT_EQ(Pod(spec)["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"],
            "topology.k8s.aws/network-node-layer-2");
}

TEST(GangPodTest, CoschedulingPodGroup) {
  json spec = BaseSpec({{"gang", {{"provider", "coscheduling"}}}});
  spec["runPolicy"] = {{"schedulingTimeoutSeconds", 300}};
  json pod = Pod(spec);
  EXPECT_EQ(pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], "llama-0b7c94e1");
  EXPECT_EQ(pod["spec"]["schedulerName"], "scheduler-plugins-scheduler");
  json pg = BuildPodGroup(Meta(), Spec(spec));
  EXPECT_EQ(pg["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
  EXPECT_EQ(pg["kind"], "PodGroup");
  EXPECT_EQ(pg["metadata"]["name"], "llama-0b7c94e1");
  EXPECT_EQ(pg["metadata"]["namespace"], "team-a");
  EXPECT_EQ(pg["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  EXPECT_EQ(pg["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(pg["spec"]["minMember"], 4);
  EXPECT_EQ(pg["spec"]["scheduleTimeoutSeconds"], 300);
  // A scheduler the user names wins (the coscheduling plugin in another profile).
  spec["scheduling"]["schedulerName"] = "gang-scheduler";
  EXPECT_EQ(Pod(spec)["spec"]["schedulerName"], "gang-scheduler");
}

TEST(GangPodTest, VolcanoPodGroup) {
  json spec = BaseSpec({{"gang", {{"provider", "volcano"}, {"queueName", "research"}}}, {"priorityClassName", "high"}});
  spec["resources"] = {{"requests", {{"cpu", "96"}, {"memory", "1000Gi"}}}};
  json pod = Pod(spec);
  EXPECT_EQ(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"], "llama-0b7c94e1");
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  json pg = BuildPodGroup(Meta(), Spec(spec));
  EXPECT_EQ(pg["apiVersion"], "scheduling.volcano.sh/v1beta1");
  EXPECT_EQ(pg["spec"]["minMember"], 4);
  EXPECT_EQ(pg["spec"]["queue"], "research");
  EXPECT_EQ(pg["spec"]["priorityClassName"], "high");
  // What the whole gang requests: 4 nodes of the per-pod requests.
  const json& min = pg["spec"]["minResources"];
  EXPECT_EQ(min["nvidia.com/gpu"], "32");
  EXPECT_EQ(min["vpc.amazonaws.com/efa"], "128");
  EXPECT_EQ(min["cpu"], "384");
  EXPECT_EQ(min["memory"], "4000Gi");
  EXPECT_EQ(min["hugepages-2Mi"], "20480Mi");
}

json PodAffinity(const json& pod) { return pod["spec"]["affinity"]["podAffinity"]; }

TEST(TopologyPodTest, RequiredLayerKeepsTheAttemptUnderOneNetworkNode) {
  json spec = BaseSpec({{"topology", {{"layer", 1}}}});
  json term = PodAffinity(Pod(spec, 0, 2))["requiredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(term["topologyKey"], "topology.k8s.aws/network-node-layer-1");
  EXPECT_EQ(term["labelSelector"]["matchLabels"],
            json({{"hypertrain.dev/job-name", "llama"}, {"hypertrain.dev/restart-attempt", "2"}}));
  // Rank 0 has no predecessor; rank 3 prefers rank 2's layer-3, then layer-2 network node.
  EXPECT_FALSE(PodAffinity(Pod(spec, 0)).contains("preferredDuringSchedulingIgnoredDuringExecution"));
  json prefs = PodAffinity(Pod(spec, 3))["preferredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(prefs.size(), 2u);
  EXPECT_EQ(prefs[0]["weight"], 80);
  EXPECT_EQ(prefs[0]["podAffinityTerm"]["topologyKey"], "topology.k8s.aws/network-node-layer-3");
  EXPECT_EQ(prefs[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]["hypertrain.dev/node-rank"], "2");
  EXPECT_EQ(prefs[1]["podAffinityTerm"]["topologyKey"], "topology.k8s.aws/network-node-layer-2");
  // At layer 3 there is nothing finer to prefer.
  EXPECT_FALSE(PodAffinity(Pod(BaseSpec({{"topology", {{"layer", 3}}}}), 3))
                   .contains("preferredDuringSchedulingIgnoredDuringExecution"));
}

TEST(TopologyPodTest, PreferredAndCustomKeys) {
  json pa = PodAffinity(Pod(BaseSpec({{"topology", {{"topologyKey", "example.com/rack"}, {"mode", "Preferred"}}}}), 1));
  EXPECT_FALSE(pa.contains("requiredDuringSchedulingIgnoredDuringExecution"));
  ASSERT_EQ(pa["preferredDuringSchedulingIgnoredDuringExecution"].size(), 1u);
  EXPECT_EQ(pa["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"], 100);
  EXPECT_EQ(pa["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"],
            "example.com/rack");
  // The user's own pod affinity stays.
  json user = {{"podAffinity",
                {{"requiredDuringSchedulingIgnoredDuringExecution",
                  {{{"topologyKey", "zone"}, {"labelSelector", {{"matchLabels", {{"cache", "warm"}}}}}}}}}}};
  pa = PodAffinity(Pod(BaseSpec({{"affinity", user}, {"topology", {{"layer", 3}}}})));
  EXPECT_EQ(pa["requiredDuringSchedulingIgnoredDuringExecution"].size(), 2u);
}

TEST(DeepHealthPodTest, PreferredByDefaultRequiredOnRequest) {
  json na = Pod(BaseSpec())["spec"]["affinity"]["nodeAffinity"];
  json pref = na["preferredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(pref["weight"], 100);
  EXPECT_EQ(pref["preference"]["matchExpressions"][0],
            json({{"key", "sagemaker.amazonaws.com/deep-health-check-status"}, {"operator", "In"}, {"values", {"Passed"}}}));
  json spec = BaseSpec();
  spec["faultPolicy"] = {{"deepHealthCheck", "Required"}};
  na = Pod(spec)["spec"]["affinity"]["nodeAffinity"];
  EXPECT_FALSE(na.contains("preferredDuringSchedulingIgnoredDuringExecution"));
  json exprs = na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
  EXPECT_THAT(exprs.dump(), HasSubstr("deep-health-check-status"));
  EXPECT_THAT(exprs.dump(), HasSubstr("node-health-status"));
}

TEST(PodTemplatePodTest, TemplateIsMergedAndTheOperatorsFieldsStay) {
  json spec = BaseSpec();
  spec["podTemplate"] = json::parse(R"({
    "metadata": {"labels": {"team": "a"}},
    "spec": {
      "imagePullSecrets": [{"name": "ecr"}],
      "securityContext": {"fsGroup": 1000},
      "runtimeClassName": "nvidia",
      "enableServiceLinks": true,
      "volumes": [{"name": "logs", "emptyDir": {}}],
      "initContainers": [{"name": "fetch", "image": "busybox"}],
      "containers": [
        {"name": "log-shipper", "image": "fluent-bit:3"},
        {"name": "trainer",
         "securityContext": {"readOnlyRootFilesystem": true},
         "livenessProbe": {"exec": {"command": ["true"]}},
         "ports": [{"name": "stats", "containerPort": 9500}],
         "envFrom": [{"secretRef": {"name": "creds"}}],
         "env": [{"name": "WANDB_MODE", "value": "offline"}],
         "volumeMounts": [{"name": "logs", "mountPath": "/logs"}]}
      ]
    }
  })");
  json pod = Pod(spec, 1);
  const json& ps = pod["spec"];
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "a");
  EXPECT_EQ(ps["imagePullSecrets"][0]["name"], "ecr");
  EXPECT_EQ(ps["securityContext"]["fsGroup"], 1000);
  EXPECT_EQ(ps["runtimeClassName"], "nvidia");
  EXPECT_EQ(ps["enableServiceLinks"], true);
  EXPECT_EQ(ps["hostname"], "llama-node-1");
  EXPECT_EQ(ps["restartPolicy"], "Never");
  ASSERT_EQ(ps["containers"].size(), 2u);
  const json& trainer = ps["containers"][0];
  EXPECT_EQ(trainer["name"], "trainer");  // first: the node agent and kubectl logs default to it
  EXPECT_EQ(trainer["command"], json({"hypertrain", "launch", "--", "train"}));
  EXPECT_EQ(trainer["securityContext"]["readOnlyRootFilesystem"], true);
  // The operator's restricted-style defaults join the template's fields.
  EXPECT_EQ(trainer["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(trainer["securityContext"]["capabilities"], json({{"drop", {"ALL"}}}));
  EXPECT_TRUE(trainer.contains("livenessProbe"));
  EXPECT_EQ(trainer["envFrom"][0]["secretRef"]["name"], "creds");
  ASSERT_EQ(trainer["ports"].size(), 3u);  // the operator's two, then the template's
  EXPECT_EQ(trainer["ports"][0]["name"], "rendezvous");
  EXPECT_EQ(trainer["ports"][1]["name"], "metrics");
  EXPECT_EQ(trainer["ports"][2], json({{"name", "stats"}, {"containerPort", 9500}}));
  EXPECT_EQ(trainer["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_THAT(trainer["env"].dump(), HasSubstr("WANDB_MODE"));
  EXPECT_THAT(trainer["env"].dump(), HasSubstr("NODE_RANK"));
  EXPECT_THAT(trainer["volumeMounts"].dump(), HasSubstr("/logs"));
  EXPECT_THAT(trainer["volumeMounts"].dump(), HasSubstr("/dev/shm"));
  EXPECT_EQ(ps["containers"][1]["name"], "log-shipper");
  EXPECT_EQ(ps["initContainers"][0]["name"], "fetch");
  EXPECT_THAT(ps["volumes"].dump(), HasSubstr("\"logs\""));
  EXPECT_THAT(ps["volumes"].dump(), HasSubstr("\"dshm\""));
}

// Issue 35, item 8: the trainer container's defaults are what Pod Security
// `restricted` asks (less runAsNonRoot); each field the template sets wins.
TEST(PodTemplatePodTest, TrainerSecurityContextDefaultsYieldToTheTemplate) {
  const json sc = Pod(BaseSpec())["spec"]["containers"][0]["securityContext"];
  EXPECT_EQ(sc, json::parse(R"({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}})"));
  json spec = BaseSpec();
  spec["podTemplate"] = json::parse(R"({"spec": {"containers": [{"name": "trainer",
      "securityContext": {"privileged": true, "capabilities": {"add": ["IPC_LOCK"]}}}]}})");
  const json mine = Pod(spec)["spec"]["containers"][0]["securityContext"];
  EXPECT_FALSE(mine.contains("allowPrivilegeEscalation"));  // the API server refuses it with privileged
  EXPECT_EQ(mine["capabilities"], json::parse(R"({"add": ["IPC_LOCK"]})"));
  EXPECT_EQ(mine["seccompProfile"]["type"], "RuntimeDefault");
}

}  // namespace
}  // namespace hypertrain::controller
