#include "operator/controller/builders.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace hypertrain::controller {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kConfig[] =
    "trainer:\n  max_steps: 100\nmodel:\n  sharding_strategy: hybrid_shard\n"
    "exp_manager:\n  checkpoint_dir: /fsx/ckpt/llama\n";

api::ObjectMeta Meta() {
  api::ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  m.uid = "0b7c-uid";
  return m;
}

json P5Spec() {
  return json{{"image", "hypertrain:1"},
              {"instanceType", "ml.p5.48xlarge"},
              {"nodes", 2},
              {"trainerConfig", {{"inline", kConfig}}}};
}

api::TrainingJobSpec Spec(const json& j) {
  auto r = api::ParseSpec(j, Meta());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : api::TrainingJobSpec{};
}

json Pod(const json& spec_json, int rank = 0, int attempt = 0, std::vector<std::string> excluded = {}) {
  auto pod = BuildPod(Meta(), Spec(spec_json), PodOptions{rank, attempt, std::move(excluded)});
  EXPECT_TRUE(pod.ok()) << pod.status().ToString();
  return pod.ok() ? pod.value() : json();
}

// name -> value (or "valueFrom:<fieldPath>") for a container env list.
std::map<std::string, std::string> EnvMap(const json& env) {
  std::map<std::string, std::string> out;
  for (const json& e : env) {
    const std::string name = e["name"];
    EXPECT_FALSE(out.count(name)) << "duplicate env " << name;
    if (e.contains("value")) {
      out[name] = e["value"];
    } else if (e["valueFrom"].contains("fieldRef")) {
      out[name] = "valueFrom:" + e["valueFrom"]["fieldRef"]["fieldPath"].get<std::string>();
    } else {
      out[name] = "valueFrom:" + e["valueFrom"].dump();
    }
  }
  return out;
}

TEST(NamesTest, Conventions) {
  EXPECT_EQ(PodName("llama", 3), "llama-node-3");
  EXPECT_EQ(ServiceName("llama"), "llama");
  EXPECT_EQ(ConfigMapName("llama"), "llama-config");
  EXPECT_EQ(MasterAddr(Meta()), "llama-node-0.llama.team-a.svc");
}

TEST(ServiceTest, HeadlessAndPublishesNotReadyAddresses) {
  json svc = BuildService(Meta(), Spec(P5Spec()));
  EXPECT_EQ(svc["kind"], "Service");
  EXPECT_EQ(svc["metadata"]["name"], "llama");
  EXPECT_EQ(svc["metadata"]["namespace"], "team-a");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["selector"], json({{"hypertrain.dev/job-name", "llama"}}));
  EXPECT_EQ(svc["spec"]["ports"][0]["port"], 29500);
  const json& owner = svc["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["apiVersion"], "hypertrain.dev/v1alpha1");
  EXPECT_EQ(owner["kind"], "TrainingJob");
  EXPECT_EQ(owner["name"], "llama");
  EXPECT_EQ(owner["uid"], "0b7c-uid");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(owner["blockOwnerDeletion"], true);
}

TEST(ConfigMapTest, HoldsTheInlineConfig) {
  auto cm = BuildConfigMap(Meta(), Spec(P5Spec()));
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ((*cm)["metadata"]["name"], "llama-config");
  EXPECT_EQ((*cm)["data"]["config.yaml"], kConfig);
  EXPECT_EQ((*cm)["metadata"]["ownerReferences"][0]["controller"], true);
  json spec = P5Spec();
  spec["trainerConfig"] = {{"configMapRef", {{"name", "mine"}, {"key", "job.yaml"}}}};
  EXPECT_THAT(BuildConfigMap(Meta(), Spec(spec)).status().message(), HasSubstr("mine"));
}

TEST(PodTest, IdentityLabelsAndOwner) {
  json pod = Pod(P5Spec(), 1, 3);
  EXPECT_EQ(pod["metadata"]["name"], "llama-node-1");
  EXPECT_EQ(pod["spec"]["hostname"], "llama-node-1");
  EXPECT_EQ(pod["spec"]["subdomain"], "llama");
  const json& labels = pod["metadata"]["labels"];
  EXPECT_EQ(labels["hypertrain.dev/job-name"], "llama");
  EXPECT_EQ(labels["hypertrain.dev/node-rank"], "1");
  EXPECT_EQ(labels["hypertrain.dev/restart-attempt"], "3");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "0b7c-uid");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 300);
  EXPECT_EQ(pod["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"], "ml.p5.48xlarge");
  EXPECT_FALSE(pod["spec"].contains("schedulerName"));
  EXPECT_FALSE(pod["spec"].contains("tolerations"));
  // The service selects every pod of the job, whatever the attempt.
  json svc = BuildService(Meta(), Spec(P5Spec()));
  for (auto& [k, v] : svc["spec"]["selector"].items()) EXPECT_EQ(labels[k], v);
}

TEST(PodTest, OutOfRangeRankIsAnError) {
  api::TrainingJobSpec spec = Spec(P5Spec());
  EXPECT_FALSE(BuildPod(Meta(), spec, PodOptions{2, 0, {}}).ok());
  EXPECT_FALSE(BuildPod(Meta(), spec, PodOptions{-1, 0, {}}).ok());
  EXPECT_FALSE(BuildPod(Meta(), spec, PodOptions{0, -1, {}}).ok());
}

TEST(PodTest, RendezvousEnv) {
  json pod = Pod(P5Spec(), 1, 2);
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["name"], "trainer");
  auto env = EnvMap(c["env"]);
  EXPECT_EQ(env["MASTER_ADDR"], "llama-node-0.llama.team-a.svc");
  EXPECT_EQ(env["PET_MASTER_ADDR"], env["MASTER_ADDR"]);
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["PET_MASTER_PORT"], "29500");
  EXPECT_EQ(env["WORLD_SIZE"], "16");
  EXPECT_EQ(env["NNODES"], "2");
  EXPECT_EQ(env["PET_NNODES"], "2");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["PET_NODE_RANK"], "1");
  EXPECT_EQ(env["NPROC_PER_NODE"], "8");
  EXPECT_EQ(env["PET_NPROC_PER_NODE"], "8");
  EXPECT_EQ(env["RESTART_ATTEMPT"], "2");
  EXPECT_EQ(env["HYPERTRAIN_CHECKPOINT_DIR"], "/fsx/ckpt/llama");
  EXPECT_EQ(env["HYPERTRAIN_CONFIG"], "/etc/hypertrain/config.yaml");
  EXPECT_FALSE(env.count("HYPERTRAIN_POD_NAME")) << "the pods annotate their progress ConfigMap, not a pod";
  EXPECT_EQ(env["HYPERTRAIN_NAMESPACE"], "valueFrom:metadata.namespace");
  EXPECT_EQ(env["HYPERTRAIN_JOB_NAME"], "valueFrom:metadata.labels['hypertrain.dev/job-name']");
  EXPECT_FALSE(env.count("HYPERTRAIN_NODE_NAME"));  // nothing in the runtime reads it
  EXPECT_EQ(env["HYPERTRAIN_PROGRESS_CONFIGMAP"], "llama-progress");
  // The default command takes the rank count and the config from this env.
  EXPECT_EQ(c["command"], json({"hypertrain", "launch", "--", "train"}));
  EXPECT_FALSE(c.contains("args"));
}

TEST(PodTest, CpuJobWorldSizeUsesNprocPerNode) {
  json spec = {{"image", "x"}, {"nodes", 2}, {"nprocPerNode", 2}, {"trainerConfig", {{"inline", kConfig}}}};
  json pod = Pod(spec, 0, 0);
  auto env = EnvMap(pod["spec"]["containers"][0]["env"]);
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["NPROC_PER_NODE"], "2");
  // No NCCL/EFA defaults on CPU (local runs rendezvous over loopback).
  EXPECT_FALSE(env.count("NCCL_SOCKET_IFNAME"));
  EXPECT_FALSE(env.count("FI_PROVIDER"));
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("resources"));
  EXPECT_FALSE(pod["spec"].contains("nodeSelector"));
}

TEST(PodTest, EfaDefaultsPerInstanceType) {
  auto p5 = EnvMap(Pod(P5Spec())["spec"]["containers"][0]["env"]);
  EXPECT_EQ(p5["FI_PROVIDER"], "efa");
  EXPECT_EQ(p5["FI_EFA_USE_DEVICE_RDMA"], "1");
  EXPECT_EQ(p5["FI_EFA_FORK_SAFE"], "1");
  EXPECT_EQ(p5["NCCL_SOCKET_IFNAME"], "^lo");

  json g5 = P5Spec();
  g5["instanceType"] = "ml.g5.48xlarge";
  auto g5env = EnvMap(Pod(g5)["spec"]["containers"][0]["env"]);
  EXPECT_EQ(g5env["FI_PROVIDER"], "efa");
  EXPECT_FALSE(g5env.count("FI_EFA_USE_DEVICE_RDMA")) << "no GPUDirect RDMA on g5";

  json p4d = P5Spec();
  p4d["instanceType"] = "ml.p4d.24xlarge";
  EXPECT_EQ(EnvMap(Pod(p4d)["spec"]["containers"][0]["env"])["FI_EFA_USE_DEVICE_RDMA"], "1");

  json no_efa = P5Spec();
  no_efa["efaPerNode"] = 0;
  auto ne = EnvMap(Pod(no_efa)["spec"]["containers"][0]["env"]);
  EXPECT_FALSE(ne.count("FI_PROVIDER"));
  EXPECT_EQ(ne["NCCL_SOCKET_IFNAME"], "^lo");
}

TEST(PodTest, UserEnvOverridesDefaultsOnce) {
  json spec = P5Spec();
  spec["env"] = json::array({{{"name", "NCCL_DEBUG"}, {"value", "INFO"}},
                             {{"name", "FI_EFA_USE_DEVICE_RDMA"}, {"value", "0"}},
                             {{"name", "HF_TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "hf"}, {"key", "t"}}}}}}});
  const json env = Pod(spec)["spec"]["containers"][0]["env"];
  auto m = EnvMap(env);  // also asserts no duplicates
  EXPECT_EQ(m["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(m["FI_EFA_USE_DEVICE_RDMA"], "0");
  EXPECT_EQ(m["FI_PROVIDER"], "efa");
  bool found = false;
  for (const json& e : env) {
    if (e["name"] == "HF_TOKEN") {
      EXPECT_EQ(e["valueFrom"]["secretKeyRef"]["name"], "hf");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// The launcher's Prometheus endpoint: the env on every pod, the same port
// declared as "metrics" (the PodMonitor's target); spec.env moves or disables it.
TEST(PodTest, MetricsPortEnvAndContainerPort) {
  auto port_named = [](const json& pod, const std::string& name) -> int {
    for (const json& p : pod["spec"]["containers"][0]["ports"]) {
      if (p["name"] == name) return p["containerPort"].get<int>();
    }
    return -1;
  };
  json cpu = P5Spec();
  cpu.erase("instanceType");
  cpu["gpusPerNode"] = 0;
  cpu["efaPerNode"] = 0;
  cpu["nprocPerNode"] = 2;
  for (const json& spec : {P5Spec(), cpu}) {
    const json pod = Pod(spec);
    EXPECT_EQ(EnvMap(pod["spec"]["containers"][0]["env"])["HYPERTRAIN_METRICS_PORT"], "9400");
    EXPECT_EQ(port_named(pod, kMetricsPortName), 9400);
    EXPECT_EQ(port_named(pod, kRendezvousPortName), 29500);
  }
  json moved = P5Spec();
  moved["env"] = json::array({{{"name", "HYPERTRAIN_METRICS_PORT"}, {"value", "9100"}}});
  EXPECT_EQ(EnvMap(Pod(moved)["spec"]["containers"][0]["env"])["HYPERTRAIN_METRICS_PORT"], "9100");
  EXPECT_EQ(port_named(Pod(moved), kMetricsPortName), 9100);
  json off = P5Spec();
  off["env"] = json::array({{{"name", "HYPERTRAIN_METRICS_PORT"}, {"value", "0"}}});
  EXPECT_EQ(port_named(Pod(off), kMetricsPortName), -1);
}

TEST(PodTest, ResourcesAreNeverDropped) {
  json spec = P5Spec();
  spec["resources"] = {{"requests", {{"cpu", "96"}, {"memory", "1500Gi"}}}, {"limits", {{"memory", "1800Gi"}}}};
  const json r = Pod(spec)["spec"]["containers"][0]["resources"];
  EXPECT_EQ(r["requests"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(r["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(r["requests"]["vpc.amazonaws.com/efa"], "32");
  EXPECT_EQ(r["limits"]["vpc.amazonaws.com/efa"], "32");
  EXPECT_EQ(r["requests"]["hugepages-2Mi"], "5120Mi");
  EXPECT_EQ(r["limits"]["hugepages-2Mi"], "5120Mi");
  EXPECT_EQ(r["requests"]["cpu"], "96");
  EXPECT_EQ(r["requests"]["memory"], "1500Gi");
  EXPECT_EQ(r["limits"]["memory"], "1800Gi");

  // A user hugepages value given only as a limit becomes the request too.
  spec["resources"] = {{"limits", {{"hugepages-2Mi", "8Gi"}, {"memory", "64Gi"}}}};
  const json r2 = Pod(spec)["spec"]["containers"][0]["resources"];
  EXPECT_EQ(r2["requests"]["hugepages-2Mi"], "8Gi");
  EXPECT_EQ(r2["limits"]["hugepages-2Mi"], "8Gi");
  EXPECT_FALSE(r2["requests"].contains("cpu"));

  // Hugepages without cpu/memory get a cpu request (Kubernetes requires one).
  const json r3 = Pod(P5Spec())["spec"]["containers"][0]["resources"];
  EXPECT_EQ(r3["requests"]["cpu"], "1");
  EXPECT_EQ(r3["requests"]["hugepages-2Mi"], "5120Mi");
}

TEST(PodTest, NodeHealthAndExclusionAffinity) {
  json pod = Pod(P5Spec(), 0, 1, {"ip-10-1-2-3", "ip-10-9-9-9", "ip-10-1-2-3"});
  const json& terms =
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);
  const json& ex = terms[0]["matchExpressions"];
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0], json({{"key", "sagemaker.amazonaws.com/node-health-status"},
                         {"operator", "In"},
                         {"values", {"Schedulable"}}}));
  EXPECT_EQ(ex[1], json({{"key", "kubernetes.io/hostname"},
                         {"operator", "NotIn"},
                         {"values", {"ip-10-1-2-3", "ip-10-9-9-9"}}}));
}

TEST(PodTest, UserAffinityIsMergedIntoEveryTerm) {
  json spec = P5Spec();
  spec["scheduling"] = {
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             json::array({{{"matchExpressions", json::array({{{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}}})}},
                          {{"matchFields", json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"n1"}}}})}}})}}},
          {"preferredDuringSchedulingIgnoredDuringExecution",
           json::array({{{"weight", 10},
                         {"preference", {{"matchExpressions", json::array({{{"key", "x"}, {"operator", "Exists"}}})}}}}})}}},
        {"podAntiAffinity", {{"preferredDuringSchedulingIgnoredDuringExecution", json::array()}}}}}};
  json pod = Pod(spec);
  const json& aff = pod["spec"]["affinity"];
  const json& terms = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  ASSERT_EQ(terms[0]["matchExpressions"].size(), 2u);
  EXPECT_EQ(terms[0]["matchExpressions"][0]["key"], "zone");
  EXPECT_EQ(terms[0]["matchExpressions"][1]["key"], "sagemaker.amazonaws.com/node-health-status");
  EXPECT_EQ(terms[1]["matchFields"][0]["key"], "metadata.name");
  EXPECT_EQ(terms[1]["matchExpressions"][0]["key"], "sagemaker.amazonaws.com/node-health-status");
  EXPECT_EQ(aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"], 10);
  EXPECT_TRUE(aff.contains("podAntiAffinity"));
}

TEST(PodTest, HealthRequirementConfigurableAndDisableable) {
  json spec = P5Spec();
  spec["faultPolicy"] = {{"nodeHealthLabel", "example.com/ok"}, {"healthyNodeValues", {"yes"}}};
  json ex = Pod(spec)["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                    ["nodeSelectorTerms"][0]["matchExpressions"][0];
  EXPECT_EQ(ex["key"], "example.com/ok");
  EXPECT_EQ(ex["values"], json({"yes"}));
  spec["faultPolicy"] = {{"healthyNodeValues", json::array()}, {"deepHealthCheck", "Ignored"}};
  EXPECT_FALSE(Pod(spec)["spec"].contains("affinity"));
}

TEST(PodTest, VolumesShmConfigAndUserMounts) {
  json spec = P5Spec();
  spec["shmSize"] = "64Gi";
  spec["volumes"] = json::array({{{"name", "fsx"}, {"persistentVolumeClaim", {{"claimName", "fsx-claim"}}}}});
  spec["volumeMounts"] = json::array({{{"name", "fsx"}, {"mountPath", "/fsx"}}});
  json pod = Pod(spec);
  const json& vols = pod["spec"]["volumes"];
  ASSERT_EQ(vols.size(), 3u);
  EXPECT_EQ(vols[0]["name"], "dshm");
  EXPECT_EQ(vols[0]["emptyDir"]["medium"], "Memory");
  EXPECT_EQ(vols[0]["emptyDir"]["sizeLimit"], "64Gi");
  EXPECT_EQ(vols[1]["configMap"]["name"], "llama-config");
  EXPECT_EQ(vols[2]["persistentVolumeClaim"]["claimName"], "fsx-claim");
  const json& mounts = pod["spec"]["containers"][0]["volumeMounts"];
  ASSERT_EQ(mounts.size(), 3u);
  EXPECT_EQ(mounts[0]["mountPath"], "/dev/shm");
  EXPECT_EQ(mounts[1]["mountPath"], "/etc/hypertrain");
  EXPECT_EQ(mounts[1]["readOnly"], true);
  EXPECT_EQ(mounts[2]["mountPath"], "/fsx");

  spec["trainerConfig"] = {{"configMapRef", {{"name", "mine"}, {"key", "job.yaml"}}}};
  json pod2 = Pod(spec);
  const json& cm = pod2["spec"]["volumes"][1]["configMap"];
  EXPECT_EQ(cm["name"], "mine");
  EXPECT_EQ(cm["items"][0], json({{"key", "job.yaml"}, {"path", "config.yaml"}}));
}

TEST(PodTest, SchedulingFieldsPassThrough) {
  json spec = P5Spec();
  spec["serviceAccountName"] = "trainer";
  spec["command"] = {"/bin/train"};
  spec["args"] = {"--x"};
  spec["podMetadata"] = {{"labels", {{"team", "a"}}}, {"annotations", {{"note", "n"}}}};
  spec["scheduling"] = {{"schedulerName", "volcano"},
                        {"priorityClassName", "high"},
                        {"terminationGracePeriodSeconds", 120},
                        {"nodeSelector", {{"pool", "train"}}},
                        {"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}})}};
  json pod = Pod(spec);
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  EXPECT_EQ(pod["spec"]["priorityClassName"], "high");
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 120);
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "trainer");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["pool"], "train");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"], "ml.p5.48xlarge");
  EXPECT_EQ(pod["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "a");
  EXPECT_EQ(pod["metadata"]["labels"]["hypertrain.dev/job-name"], "llama");
  EXPECT_EQ(pod["metadata"]["annotations"]["note"], "n");
  EXPECT_EQ(pod["spec"]["containers"][0]["command"], json({"/bin/train"}));
  EXPECT_EQ(pod["spec"]["containers"][0]["args"], json({"--x"}));
  // No toleration of the HyperPod unhealthy taint ever reaches a pod.
  for (const json& t : pod["spec"]["tolerations"]) {
    EXPECT_NE(t.value("key", ""), "sagemaker.amazonaws.com/node-health-status");
  }
}

// Defect 5 of issue 19: a real kubelet reports only the termination log under
// the API default (File), and nothing writes one for most failures.
TEST(PodTest, TerminationMessageFallsBackToTheLog) {
  EXPECT_EQ(Pod(P5Spec())["spec"]["containers"][0]["terminationMessagePolicy"], "FallbackToLogsOnError");
}

// Defects 1 and 3 of issue 19: the pods run as the job's own ServiceAccount,
// whose only right is `patch` on the job's progress ConfigMap.
TEST(TrainerIdentityTest, OwnServiceAccountMayPatchOnlyItsProgressConfigMap) {
  const api::TrainingJobSpec spec = Spec(P5Spec());
  EXPECT_EQ(Pod(P5Spec())["spec"]["serviceAccountName"], "llama-trainer");
  json sa = BuildTrainerServiceAccount(Meta());
  EXPECT_EQ(sa["kind"], "ServiceAccount");
  EXPECT_EQ(sa["metadata"]["name"], "llama-trainer");
  EXPECT_EQ(sa["metadata"]["namespace"], "team-a");
  json cm = BuildProgressConfigMap(Meta());
  EXPECT_EQ(cm["metadata"]["name"], "llama-progress");
  EXPECT_FALSE(cm.contains("data"));
  json role = BuildProgressRole(Meta());
  EXPECT_EQ(role["metadata"]["name"], "llama-progress");
  ASSERT_EQ(role["rules"].size(), 1u);
  EXPECT_EQ(role["rules"][0], json({{"apiGroups", {""}},
                                   {"resources", {"configmaps"}},
                                   {"resourceNames", {"llama-progress"}},
                                   {"verbs", {"patch"}}}));
  json rb = BuildProgressRoleBinding(Meta(), spec);
  EXPECT_EQ(rb["roleRef"], json({{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "llama-progress"}}));
  EXPECT_EQ(rb["subjects"], json::array({{{"kind", "ServiceAccount"}, {"name", "llama-trainer"}, {"namespace", "team-a"}}}));
  for (const json& obj : {sa, cm, role, rb}) {
    EXPECT_EQ(obj["metadata"]["ownerReferences"][0]["uid"], "0b7c-uid") << obj["kind"];
    EXPECT_EQ(obj["metadata"]["labels"]["hypertrain.dev/job-name"], "llama") << obj["kind"];
  }
  // A ServiceAccount of the user's (e.g. for IRSA) gets the binding instead.
  json own = P5Spec();
  own["serviceAccountName"] = "s3-reader";
  EXPECT_EQ(Pod(own)["spec"]["serviceAccountName"], "s3-reader");
  EXPECT_EQ(BuildProgressRoleBinding(Meta(), Spec(own))["subjects"][0]["name"], "s3-reader");
}

TEST(PodTest, BuildersArePure) {
  api::TrainingJobSpec spec = Spec(P5Spec());
  auto a = BuildPod(Meta(), spec, PodOptions{1, 1, {"n"}});
  auto b = BuildPod(Meta(), spec, PodOptions{1, 1, {"n"}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value(), b.value());
}

TEST(EventTest, ShapeAndStableName) {
  json e = BuildEvent(Meta(), EventType::kWarning, "NodeFault", "node ip-1 failed", "2026-11-22T01:00:00Z", "op-0");
  EXPECT_EQ(e["kind"], "Event");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["reason"], "NodeFault");
  EXPECT_EQ(e["involvedObject"]["kind"], "TrainingJob");
  EXPECT_EQ(e["involvedObject"]["uid"], "0b7c-uid");
  EXPECT_EQ(e["metadata"]["namespace"], "team-a");
  EXPECT_EQ(e["firstTimestamp"], "2026-11-22T01:00:00Z");
  EXPECT_EQ(e["reportingInstance"], "op-0");
  const std::string name = e["metadata"]["name"];
  EXPECT_EQ(name.rfind("llama.", 0), 0u);
  EXPECT_EQ(name.size(), std::string("llama.").size() + 16);
  EXPECT_EQ(BuildEvent(Meta(), EventType::kWarning, "NodeFault", "node ip-1 failed", "2026-11-22T01:00:00Z", "op-0")
                ["metadata"]["name"],
            name);
  EXPECT_NE(BuildEvent(Meta(), EventType::kWarning, "NodeFault", "node ip-1 failed", "2026-11-22T01:00:01Z", "op-0")
                ["metadata"]["name"],
            name);
  json n = BuildEvent(Meta(), EventType::kNormal, "JobCreated", std::string(5000, 'x'), "t", "op-0");
  EXPECT_EQ(n["type"], "Normal");
  EXPECT_EQ(n["message"].get<std::string>().size(), 1024u);
}

}  // namespace
}  // namespace hypertrain::controller
