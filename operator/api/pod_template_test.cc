// spec.podTemplate: what it adds, and every way it can conflict with the
// operator's pod or the rest of the spec (rejected naming the field).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/api/training_job.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kConfig[] = "trainer:\n  max_steps: 100\nmodel:\n  sharding_strategy: hybrid_shard\n";

ObjectMeta Meta() {
  ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  return m;
}

json Spec(json pod_template) {
  return {{"image", "hypertrain:1"},
          {"instanceType", "ml.p5.48xlarge"},
          {"nodes", 2},
          {"trainerConfig", {{"inline", kConfig}}},
          {"resources", {{"requests", {{"cpu", "16"}}}}},
          {"env", {{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}}},
          {"volumes", {{{"name", "fsx"}, {"persistentVolumeClaim", {{"claimName", "fsx-pvc"}}}}}},
          {"podTemplate", pod_template}};
}

std::string Error(const json& pod_template) {
  auto r = ParseSpec(Spec(pod_template), Meta());
  EXPECT_FALSE(r.ok()) << pod_template.dump();
  return r.ok() ? "" : r.status().message();
}

TrainingJobSpec Ok(const json& pod_template) {
  auto r = ParseSpec(Spec(pod_template), Meta());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : TrainingJobSpec{};
}

json FullTemplate() {
  return {{"metadata", {{"labels", {{"team", "a"}}}, {"annotations", {{"sidecar.istio.io/inject", "false"}}}}},
          {"spec",
           {{"imagePullSecrets", {{{"name", "ecr"}}}},
            {"securityContext", {{"runAsNonRoot", true}, {"fsGroup", 1000}}},
            {"runtimeClassName", "nvidia"},
            {"topologySpreadConstraints",
             {{{"maxSkew", 1}, {"topologyKey", "topology.kubernetes.io/zone"}, {"whenUnsatisfiable", "ScheduleAnyway"}}}},
            {"volumes", {{{"name", "logs"}, {"emptyDir", json::object()}}}},
            {"initContainers", {{{"name", "fetch"}, {"image", "busybox"}, {"command", {"true"}}}}},
            {"containers",
             {{{"name", "trainer"},
               {"securityContext", {{"allowPrivilegeEscalation", false}}},
               {"env", {{{"name", "HF_TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "hf"}, {"key", "token"}}}}}}}},
               {"envFrom", {{{"configMapRef", {{"name", "team-env"}}}}}},
               {"volumeMounts", {{{"name", "logs"}, {"mountPath", "/logs"}}}},
               {"resources", {{"requests", {{"memory", "512Gi"}}}}}},
              {{"name", "log-shipper"},
               {"image", "fluent-bit:3"},
               {"volumeMounts", {{{"name", "logs"}, {"mountPath", "/logs"}, {"readOnly", true}}}}}}}}}};
}

TEST(PodTemplateTest, EverythingItAddsLandsInTheSpec) {
  TrainingJobSpec s = Ok(FullTemplate());
  EXPECT_EQ(s.pod_labels.at("team"), "a");
  EXPECT_EQ(s.pod_annotations.at("sidecar.istio.io/inject"), "false");
  ASSERT_EQ(s.volumes.size(), 2u);
  EXPECT_EQ(s.volumes[1]["name"], "logs");
  EXPECT_EQ(s.env.size(), 2u);
  EXPECT_EQ(s.env[1].name, "HF_TOKEN");
  EXPECT_EQ(s.requests.at("memory"), "512Gi");
  EXPECT_EQ(s.requests.at("cpu"), "16");
  ASSERT_EQ(s.volume_mounts.size(), 1u);
  EXPECT_EQ(s.volume_mounts[0]["mountPath"], "/logs");
  EXPECT_EQ(s.pod_template.env_from[0]["configMapRef"]["name"], "team-env");
  EXPECT_EQ(s.pod_template.trainer["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_FALSE(s.pod_template.trainer.contains("env"));
  ASSERT_EQ(s.pod_template.sidecars.size(), 1u);
  EXPECT_EQ(s.pod_template.sidecars[0]["name"], "log-shipper");
  ASSERT_EQ(s.pod_template.init_containers.size(), 1u);
  EXPECT_EQ(s.pod_template.spec["imagePullSecrets"][0]["name"], "ecr");
  EXPECT_EQ(s.pod_template.spec["runtimeClassName"], "nvidia");
  EXPECT_FALSE(s.pod_template.spec.contains("containers"));
  EXPECT_FALSE(s.pod_template.spec.contains("volumes"));
}

TEST(PodTemplateTest, OperatorOwnedPodFieldsAreRejected) {
  EXPECT_THAT(Error({{"spec", {{"restartPolicy", "OnFailure"}}}}), HasSubstr("spec.podTemplate.spec.restartPolicy: the operator sets Never"));
  EXPECT_THAT(Error({{"spec", {{"hostname", "x"}}}}), HasSubstr("spec.podTemplate.spec.hostname"));
  EXPECT_THAT(Error({{"spec", {{"tolerations", json::array()}}}}), HasSubstr("spec.podTemplate.spec.tolerations: set spec.scheduling.tolerations"));
  EXPECT_THAT(Error({{"spec", {{"affinity", json::object()}}}}), HasSubstr("set spec.scheduling.affinity"));
  EXPECT_THAT(Error({{"spec", {{"serviceAccountName", "sa"}}}}), HasSubstr("set spec.serviceAccountName"));
  EXPECT_THAT(Error({{"spec", {{"schedulingGates", json::array()}}}}), HasSubstr("spec.podTemplate.spec.schedulingGates"));
  EXPECT_THAT(Error({{"kind", "Pod"}}), HasSubstr("spec.podTemplate.kind: unknown field"));
  EXPECT_THAT(Error({{"metadata", {{"name", "x"}}}}), HasSubstr("spec.podTemplate.metadata.name: only labels and annotations"));
}

TEST(PodTemplateTest, TrainerContainerConflictsAreRejected) {
  auto trainer = [](json fields) {
    fields["name"] = "trainer";
    return json{{"spec", {{"containers", {fields}}}}};
  };
  EXPECT_THAT(Error(trainer({{"command", {"python", "train.py"}}})),
              HasSubstr("spec.podTemplate.spec.containers[0].command: set spec.command"));
  EXPECT_THAT(Error(trainer({{"image", "other"}})), HasSubstr("containers[0].image: set spec.image"));
  EXPECT_THAT(Error(trainer({{"env", {{{"name", "MASTER_ADDR"}, {"value", "x"}}}}})),
              HasSubstr("containers[0].env[0].name: 'MASTER_ADDR' is reserved"));
  EXPECT_THAT(Error(trainer({{"env", {{{"name", "NCCL_DEBUG"}, {"value", "WARN"}}}}})),
              HasSubstr("containers[0].env[0].name: 'NCCL_DEBUG' is also set in spec.env"));
  EXPECT_THAT(Error(trainer({{"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}})),
              HasSubstr("containers[0].resources.limits.nvidia.com/gpu: set spec.gpusPerNode"));
  EXPECT_THAT(Error(trainer({{"resources", {{"requests", {{"cpu", "8"}}}}}})),
              HasSubstr("containers[0].resources.requests.cpu: is also set in spec.resources"));
  EXPECT_THAT(Error(trainer({{"resources", {{"requests", {{"memory", "-1Gi"}}}}}})),
              HasSubstr("containers[0].resources.requests.memory: must not be negative"));
  EXPECT_THAT(Error(trainer({{"ports", {{{"containerPort", 29500}}}}})),
              HasSubstr("containers[0].ports[0].containerPort: 29500 is the rendezvous port"));
  EXPECT_THAT(Error(trainer({{"volumeMounts", {{{"name", "nope"}, {"mountPath", "/x"}}}}})),
              HasSubstr("containers[0].volumeMounts[0].name: 'nope' names no volume"));
  EXPECT_THAT(Error(trainer({{"volumeMounts", {{{"name", "fsx"}, {"mountPath", "/dev/shm"}}}}})),
              HasSubstr("'/dev/shm' is mounted by the operator"));
  EXPECT_THAT(Error(trainer({{"envFrom", {{{"configMapRef", {{"name", "a"}}}, {"secretRef", {{"name", "b"}}}}}}})),
              HasSubstr("containers[0].envFrom[0]: needs exactly one of configMapRef or secretRef"));
}

TEST(PodTemplateTest, SidecarsVolumesAndMetadataConflictsAreRejected) {
  auto containers = [](json list) { return json{{"spec", {{"containers", list}}}}; };
  EXPECT_THAT(Error(containers({{{"name", "side"}}})), HasSubstr("containers[0].image: required"));
  EXPECT_THAT(Error(containers({{{"name", "Side"}, {"image", "x"}}})), HasSubstr("containers[0].name: 'Side' is not a DNS-1123 label"));
  EXPECT_THAT(Error(containers({{{"name", "a"}, {"image", "x"}}, {{"name", "a"}, {"image", "y"}}})),
              HasSubstr("containers[1].name: duplicate container name 'a'"));
  EXPECT_THAT(Error(json{{"spec", {{"initContainers", {{{"name", "trainer"}, {"image", "x"}}}}}}}),
              HasSubstr("initContainers[0].name: duplicate container name 'trainer'"));
  EXPECT_THAT(Error(containers({{{"name", "side"}, {"image", "x"}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}})),
              HasSubstr("GPUs and EFA devices belong to the trainer container"));
  EXPECT_THAT(Error(containers({{{"name", "side"}, {"image", "x"}, {"volumeMounts", {{{"name", "gone"}, {"mountPath", "/g"}}}}}})),
              HasSubstr("containers[0].volumeMounts[0].name: 'gone' names no volume"));
  EXPECT_THAT(Error(json{{"spec", {{"volumes", {{{"name", "fsx"}, {"emptyDir", json::object()}}}}}}}),
              HasSubstr("spec.podTemplate.spec.volumes[0].name: duplicate volume 'fsx'"));
  EXPECT_THAT(Error(json{{"spec", {{"volumes", {{{"name", "dshm"}, {"emptyDir", json::object()}}}}}}}),
              HasSubstr("'dshm' is reserved"));
  EXPECT_THAT(Error(json{{"spec", {{"volumes", {{{"name", "two"}, {"emptyDir", json::object()}, {"hostPath", {{"path", "/x"}}}}}}}}}),
              HasSubstr("has 2 volume sources"));
  EXPECT_THAT(Error(json{{"metadata", {{"labels", {{"hypertrain.dev/node-rank", "0"}}}}}}),
              HasSubstr("spec.podTemplate.metadata.labels.hypertrain.dev/node-rank: is set by the operator"));
  EXPECT_THAT(Error(json{{"metadata", {{"labels", {{"team", "a b"}}}}}}), HasSubstr("invalid label value"));
  EXPECT_THAT(Error(json{{"spec", {{"imagePullSecrets", {json::object()}}}}}), HasSubstr("imagePullSecrets[0].name: required"));
  EXPECT_THAT(Error(json{{"spec", {{"topologySpreadConstraints", {{{"maxSkew", 0}}}}}}}),
              HasSubstr("topologySpreadConstraints[0].maxSkew"));
  // A sidecar may mount the operator's /dev/shm.
  Ok(containers({{{"name", "side"}, {"image", "x"}, {"volumeMounts", {{{"name", "dshm"}, {"mountPath", "/dev/shm"}}}}}}));
}

TEST(PodTemplateTest, SpecVolumeMountsMayNameTemplateVolumes) {
  json spec = Spec({{"spec", {{"volumes", {{{"name", "scratch"}, {"emptyDir", json::object()}}}}}}});
  spec["volumeMounts"] = {{{"name", "scratch"}, {"mountPath", "/scratch"}}};
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->volume_mounts[0]["name"], "scratch");
  spec["volumeMounts"] = {{{"name", "undeclared"}, {"mountPath", "/u"}}};
  EXPECT_THAT(ParseSpec(spec, Meta()).status().message(), HasSubstr("spec.volumeMounts[0].name: 'undeclared' names no volume"));
}

}  // namespace
}  // namespace hypertrain::api
