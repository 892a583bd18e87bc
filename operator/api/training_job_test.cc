#include "operator/api/training_job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "contract/env.h"

namespace hypertrain::api {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kConfig[] = "trainer:\n  max_steps: 100\nmodel:\n  sharding_strategy: hybrid_shard\n";

ObjectMeta Meta(const std::string& name = "llama") {
  ObjectMeta m;
  m.name = name;
  m.namespace_ = "team-a";
  m.uid = "uid-1";
  return m;
}

json BaseSpec() {
  return json{{"image", "hypertrain:1"},
              {"instanceType", "ml.p5.48xlarge"},
              {"nodes", 2},
              {"trainerConfig", {{"inline", kConfig}}}};
}

// A validation error reads "field: message"; the tests look at both halves.
struct FieldError {
  std::string field, message, text;
};

FieldError Split(const Status& s) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  const std::string& t = s.message();
  size_t colon = t.find(": ");
  if (colon == std::string::npos) return {"", t, t};
  return {t.substr(0, colon), t.substr(colon + 2), t};
}

FieldError SpecError(const json& spec, const ObjectMeta& meta = Meta()) {
  auto r = ParseSpec(spec, meta);
  EXPECT_FALSE(r.ok());
  return r.ok() ? FieldError{} : Split(r.status());
}

TEST(ParseSpecTest, DefaultsFromTheInstanceType) {
  auto r = ParseSpec(BaseSpec(), Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TrainingJobSpec& s = *r;
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_EQ(s.nproc_per_node, 8);
  EXPECT_EQ(s.efa_per_node, 32);
  EXPECT_TRUE(s.gpudirect_rdma);
  EXPECT_EQ(s.WorldSize(), 16);
  EXPECT_EQ(s.TotalGpus(), 16);
  EXPECT_EQ(s.master_port, 29500);
  EXPECT_EQ(s.image_pull_policy, "IfNotPresent");
  EXPECT_EQ(s.command, DefaultCommand());
  EXPECT_THAT(s.command, ElementsAre("hypertrain", "launch", "--", "train"));
  EXPECT_EQ(s.run_policy.backoff_limit, 3);
  EXPECT_EQ(s.run_policy.clean_pod_policy, CleanPodPolicy::kRunning);
  EXPECT_FALSE(s.run_policy.suspend);
  EXPECT_TRUE(s.fault_policy.non_retryable_exit_codes.empty());
  EXPECT_TRUE(s.fault_policy.retryable_exit_codes.empty());
  EXPECT_EQ(s.fault_policy.deep_health_check, DeepHealthCheck::kPreferred);
  EXPECT_EQ(s.run_policy.scheduling_timeout_seconds, 0);
  EXPECT_EQ(s.scheduling.gang.provider, GangProvider::kNone);
  EXPECT_TRUE(s.scheduling.topology.key.empty());
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(s.fault_policy.node_health_label, "sagemaker.amazonaws.com/node-health-status");
  EXPECT_THAT(s.fault_policy.healthy_node_values, ElementsAre("Schedulable"));
  EXPECT_EQ(s.scheduling.termination_grace_period_seconds, 300);
  ASSERT_TRUE(s.trainer_config.summary.has_value());
  EXPECT_EQ(s.trainer_config.summary->max_steps, 100);
  EXPECT_EQ(s.trainer_config.summary->shard_degree, 8);
}

TEST(ParseSpecTest, G5HasEfaButNoRdma) {
  json spec = BaseSpec();
  spec["instanceType"] = "ml.g5.48xlarge";
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->efa_per_node, 1);
  EXPECT_FALSE(r->gpudirect_rdma);
}

TEST(ParseSpecTest, CpuJobNeedsNprocPerNode) {
  json spec = {{"image", "x"}, {"nodes", 2}, {"trainerConfig", {{"inline", kConfig}}}};
  FieldError e = SpecError(spec);
  EXPECT_EQ(e.field, "spec.nprocPerNode");
  EXPECT_THAT(e.message, HasSubstr("no GPUs"));
  spec["nprocPerNode"] = 2;
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus_per_node, 0);
  EXPECT_EQ(r->efa_per_node, 0);
  EXPECT_EQ(r->WorldSize(), 4);
}

TEST(ParseSpecTest, UnknownInstanceTypeNeedsGpusPerNode) {
  json spec = BaseSpec();
  spec["instanceType"] = "ml.p9.48xlarge";
  FieldError e = SpecError(spec);
  EXPECT_EQ(e.field, "spec.gpusPerNode");
  EXPECT_THAT(e.message, HasSubstr("ml.p9.48xlarge"));
  spec["gpusPerNode"] = 8;
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus_per_node, 8);
  EXPECT_EQ(r->efa_per_node, 0);
  // Accepted, with a warning that says which defaults were not applied.
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("ml.p9.48xlarge is not in the operator's table"));
  EXPECT_THAT(r->warnings[0], HasSubstr("no EFA devices, no hugepages-2Mi and no FI_* environment"));
  spec["efaPerNode"] = 16;
  r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->efa_per_node, 16);
  EXPECT_FALSE(r->gpudirect_rdma);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("FI_EFA_USE_DEVICE_RDMA is not set"));
}

TEST(ParseSpecTest, NewerInstanceTypesAreKnown) {
  for (const char* t : {"ml.g6e.48xlarge", "ml.p6-b200.48xlarge", "ml.g7e.12xlarge", "ml.p6e-gb200.36xlarge"}) {
    json spec = BaseSpec();
    spec["instanceType"] = t;
    auto r = ParseSpec(spec, Meta());
    ASSERT_TRUE(r.ok()) << t << ": " << r.status().ToString();
    EXPECT_GT(r->efa_per_node, 0) << t;
    EXPECT_TRUE(r->warnings.empty()) << t;
  }
}

TEST(ParseSpecTest, RangeAndShapeErrorsNameTheField) {
  json spec = BaseSpec();
  spec["gpusPerNode"] = 16;
  EXPECT_EQ(SpecError(spec).field, "spec.gpusPerNode");
  spec = BaseSpec();
  spec["efaPerNode"] = 64;
  EXPECT_EQ(SpecError(spec).field, "spec.efaPerNode");
  spec = BaseSpec();
  spec["nprocPerNode"] = 9;
  EXPECT_EQ(SpecError(spec).field, "spec.nprocPerNode");
  spec = BaseSpec();
  spec["nodes"] = 0;
  EXPECT_EQ(SpecError(spec).field, "spec.nodes");
  spec = BaseSpec();
  spec["nodes"] = "two";
  EXPECT_EQ(SpecError(spec).message, "must be an integer");
  spec = BaseSpec();
  spec["instanceType"] = "p5.48xlarge";
  EXPECT_THAT(SpecError(spec).message, HasSubstr("ml. prefix"));
  spec = BaseSpec();
  spec.erase("image");
  EXPECT_EQ(SpecError(spec).field, "spec.image");
  spec = BaseSpec();
  spec["imagePullPolicy"] = "Sometimes";
  EXPECT_THAT(SpecError(spec).message, HasSubstr("'Sometimes' is not one of Always, IfNotPresent, Never"));
  spec = BaseSpec();
  spec["masterPort"] = 80;
  EXPECT_EQ(SpecError(spec).field, "spec.masterPort");
}

TEST(ParseSpecTest, InconsistentTrainerConfigNamesTheKey) {
  json spec = BaseSpec();
  spec["trainerConfig"]["inline"] = "trainer: {max_steps: 10}\nmodel: {shard_degree: 3}\n";
  FieldError e = SpecError(spec);
  EXPECT_EQ(e.field, "spec.trainerConfig.inline");
  EXPECT_THAT(e.text, HasSubstr("spec.trainerConfig.inline: model.shard_degree: 3 does not divide"));
  spec["trainerConfig"]["inline"] = "trainer: {max_steps: 10\n";
  EXPECT_THAT(SpecError(spec).message, HasSubstr("not valid YAML"));
}

TEST(ParseSpecTest, TrainerConfigSourceIsExactlyOne) {
  json spec = BaseSpec();
  spec["trainerConfig"]["configMapRef"] = {{"name", "cfg"}};
  EXPECT_THAT(SpecError(spec).message, HasSubstr("exactly one of inline or configMapRef"));
  spec["trainerConfig"].erase("inline");
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->trainer_config.config_map.has_value());
  EXPECT_EQ(r->trainer_config.config_map->key, "config.yaml");
  EXPECT_FALSE(r->trainer_config.summary.has_value());
  spec.erase("trainerConfig");
  EXPECT_EQ(SpecError(spec).field, "spec.trainerConfig");
}

TEST(ParseSpecTest, CheckpointDirFromConfigOrSpecMustAgree) {
  json spec = BaseSpec();
  spec["trainerConfig"]["inline"] = std::string(kConfig) + "exp_manager:\n  checkpoint_dir: /fsx/ckpt\n";
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->checkpoint_dir, "/fsx/ckpt");
  spec["checkpointDir"] = "/fsx/other";
  FieldError e = SpecError(spec);
  EXPECT_EQ(e.field, "spec.checkpointDir");
  EXPECT_THAT(e.message, HasSubstr("exp_manager.checkpoint_dir"));
  spec["checkpointDir"] = "relative";
  EXPECT_THAT(SpecError(spec).message, HasSubstr("absolute"));
}

TEST(ParseSpecTest, ReservedEnvNamesAreRejected) {
  for (const std::string& name : contract::ReservedEnvNames()) {
    json spec = BaseSpec();
    spec["env"] = json::array({{{"name", "NCCL_DEBUG"}, {"value", "INFO"}}, {{"name", name}, {"value", "x"}}});
    FieldError e = SpecError(spec);
    EXPECT_EQ(e.field, "spec.env[1].name") << name;
    EXPECT_THAT(e.message, HasSubstr("reserved")) << name;
  }
  json spec = BaseSpec();
  spec["env"] = json::array({{{"name", "A"}, {"value", "1"}}, {{"name", "A"}, {"value", "2"}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("duplicate"));
  spec["env"] = json::array({{{"name", "1BAD"}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("not a valid env name"));
  spec["env"] = json::array({{{"name", "A"}, {"value", "1"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "x"}}}}}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("mutually exclusive"));
}

TEST(ParseSpecTest, OperatorOwnedResourcesAreRejected) {
  json spec = BaseSpec();
  spec["resources"] = {{"limits", {{"nvidia.com/gpu", 4}}}};
  EXPECT_THAT(SpecError(spec).message, HasSubstr("spec.gpusPerNode"));
  spec["resources"] = {{"requests", {{"vpc.amazonaws.com/efa", 1}}}};
  EXPECT_THAT(SpecError(spec).message, HasSubstr("spec.efaPerNode"));
  spec["resources"] = {{"requests", {{"memory", "lots"}}}};
  EXPECT_EQ(SpecError(spec).field, "spec.resources.requests.memory");
  spec["resources"] = {{"requests", {{"hugepages-2Mi", "1Gi"}}}, {"limits", {{"hugepages-2Mi", "2Gi"}}}};
  EXPECT_THAT(SpecError(spec).message, HasSubstr("request = limit"));
  spec["resources"] = {{"requests", {{"cpu", 96}, {"memory", "1500Gi"}}}};
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requests.at("cpu"), "96");
  EXPECT_EQ(r->requests.at("memory"), "1500Gi");
}

TEST(ParseSpecTest, TolerationOfTheUnhealthyTaintIsRejected) {
  json spec = BaseSpec();
  spec["scheduling"] = {{"tolerations", json::array({{{"key", "sagemaker.amazonaws.com/node-health-status"},
                                                     {"operator", "Exists"}}})}};
  FieldError e = SpecError(spec);
  EXPECT_EQ(e.field, "spec.scheduling.tolerations[0].key");
  EXPECT_THAT(e.message, HasSubstr("unhealthy"));
  spec["scheduling"]["tolerations"] = json::array({{{"operator", "Exists"}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("tolerates every taint"));
  spec["scheduling"]["tolerations"] =
      json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}});
  EXPECT_TRUE(ParseSpec(spec, Meta()).ok());
}

TEST(ParseSpecTest, VolumesAndMounts) {
  json spec = BaseSpec();
  spec["volumes"] = json::array({{{"name", "fsx"}, {"persistentVolumeClaim", {{"claimName", "fsx-claim"}}}}});
  spec["volumeMounts"] = json::array({{{"name", "fsx"}, {"mountPath", "/fsx"}}});
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->volumes.size(), 1u);
  spec["volumeMounts"] = json::array({{{"name", "nope"}, {"mountPath", "/fsx"}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("names no volume"));
  spec["volumeMounts"] = json::array({{{"name", "fsx"}, {"mountPath", "/dev/shm"}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("mounted by the operator"));
  spec["volumes"] = json::array({{{"name", "dshm"}, {"emptyDir", json::object()}}});
  spec.erase("volumeMounts");
  EXPECT_THAT(SpecError(spec).message, HasSubstr("reserved"));
  spec["volumes"] = json::array({{{"name", "fsx"}}});
  EXPECT_THAT(SpecError(spec).message, HasSubstr("volume source"));
}

TEST(ParseSpecTest, JobNameMustFitPodHostnames) {
  EXPECT_EQ(SpecError(BaseSpec(), Meta("Llama")).field, "metadata.name");
  EXPECT_EQ(SpecError(BaseSpec(), Meta("1llama")).field, "metadata.name");
  EXPECT_THAT(SpecError(BaseSpec(), Meta(std::string(54, 'a'))).message, HasSubstr("53"));
  EXPECT_TRUE(ParseSpec(BaseSpec(), Meta(std::string(53, 'a'))).ok());
}

TEST(ParseSpecTest, NodeSelectorMustAgreeWithInstanceType) {
  json spec = BaseSpec();
  spec["scheduling"] = {{"nodeSelector", {{"node.kubernetes.io/instance-type", "ml.g5.48xlarge"}}}};
  EXPECT_THAT(SpecError(spec).message, HasSubstr("contradicts spec.instanceType"));
}

TEST(ParseSpecTest, PoliciesParse) {
  json spec = BaseSpec();
  spec["runPolicy"] = {{"backoffLimit", 7},
                       {"activeDeadlineSeconds", 3600},
                       {"ttlSecondsAfterFinished", 60},
                       {"cleanPodPolicy", "All"},
                       {"suspend", true}};
  spec["faultPolicy"] = {{"nonRetryableExitCodes", {137, 143}},
                         {"retryableExitCodes", {3, 1}},
                         {"hangTimeoutSeconds", 600},
                         {"maxRepeatOffenders", 1},
                         {"nodeHealthLabel", "example.com/health"},
                         {"healthyNodeValues", {"ok", "good"}}};
  auto r = ParseSpec(spec, Meta());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->run_policy.backoff_limit, 7);
  EXPECT_EQ(r->run_policy.active_deadline_seconds, 3600);
  EXPECT_EQ(r->run_policy.ttl_seconds_after_finished, 60);
  EXPECT_EQ(r->run_policy.clean_pod_policy, CleanPodPolicy::kAll);
  EXPECT_TRUE(r->run_policy.suspend);
  EXPECT_THAT(r->fault_policy.non_retryable_exit_codes, ElementsAre(137, 143));
  EXPECT_THAT(r->fault_policy.retryable_exit_codes, ElementsAre(1, 3));
  EXPECT_TRUE(r->fault_policy.Retryable(1));
  EXPECT_FALSE(r->fault_policy.Retryable(2));
  EXPECT_FALSE(r->fault_policy.Retryable(127));
  EXPECT_FALSE(r->fault_policy.Retryable(137));
  EXPECT_TRUE(r->fault_policy.Retryable(200));
  EXPECT_EQ(r->fault_policy.hang_timeout_seconds, 600);
  EXPECT_EQ(r->fault_policy.node_health_label, "example.com/health");
  spec["runPolicy"]["cleanPodPolicy"] = "Some";
  EXPECT_EQ(SpecError(spec).field, "spec.runPolicy.cleanPodPolicy");
  spec = BaseSpec();
  spec["faultPolicy"] = {{"nonRetryableExitCodes", {0}}};
  EXPECT_EQ(SpecError(spec).field, "spec.faultPolicy.nonRetryableExitCodes[0]");
  spec["faultPolicy"] = {{"retryableExitCodes", {2}}};
  EXPECT_THAT(SpecError(spec).text, HasSubstr("never retried"));
  spec["faultPolicy"] = {{"retryableExitCodes", {5}}, {"nonRetryableExitCodes", {5}}};
  EXPECT_EQ(SpecError(spec).field, "spec.faultPolicy.nonRetryableExitCodes");
  spec["faultPolicy"] = {{"retryableExitCodes", {5, 5}}};
  EXPECT_EQ(SpecError(spec).field, "spec.faultPolicy.retryableExitCodes[1]");
}

TEST(ParseObjectMetaTest, ParsesAndRequiresNamespace) {
  auto m = ParseObjectMeta({{"name", "j"},
                            {"namespace", "ns"},
                            {"uid", "u"},
                            {"generation", 3},
                            {"labels", {{"a", "b"}}}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->generation, 3);
  EXPECT_EQ(m->labels.at("a"), "b");
  EXPECT_EQ(Split(ParseObjectMeta({{"name", "j"}}).status()).field, "metadata.namespace");
  EXPECT_EQ(Split(ParseObjectMeta(json::array()).status()).field, "metadata");
}

}  // namespace
}  // namespace hypertrain::api
