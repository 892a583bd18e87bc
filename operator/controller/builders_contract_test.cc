// The pod env the builders produce is the contract's (contract/env.h): every
// name the operator puts in a TrainingJob pod, other than the user's own
// spec.env entries, is a variable the contract defines as operator-set, and
// every variable the contract says the operator sets is there. Adding an env
// var to builders.cc without defining it (and its reader) in the contract
// fails this test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>

#include "contract/env.h"
#include "contract/pod.h"
#include "operator/api/training_job.h"
#include "operator/controller/builders.h"

namespace hypertrain::controller {
namespace {

using nlohmann::json;

constexpr char kConfig[] = "trainer: {max_steps: 10}\nmodel: {sharding_strategy: hybrid_shard}\n";
constexpr char kConfigWithCheckpoints[] =
    "trainer: {max_steps: 10}\nmodel: {}\nexp_manager: {checkpoint_dir: /fsx/ckpt/a}\n";

struct Case {
  const char* name;
  json spec;
};

// Specs covering every branch of BuildEnv/DefaultEnv: CPU, GPU without EFA,
// EFA without and with GPUDirect RDMA, inline config with and without a
// checkpoint dir, a ConfigMap config, user env overriding a default.
std::vector<Case> Cases() {
  return {
      {"cpu", {{"image", "x"}, {"nodes", 2}, {"nprocPerNode", 2}, {"trainerConfig", {{"inline", kConfig}}}}},
      {"gpu-no-efa", {{"image", "x"}, {"nodes", 3}, {"gpusPerNode", 4}, {"trainerConfig", {{"inline", kConfig}}}}},
      {"g5-efa-no-rdma",
       {{"image", "x"}, {"nodes", 2}, {"instanceType", "ml.g5.48xlarge"},
        {"trainerConfig", {{"inline", kConfigWithCheckpoints}}}}},
      {"p5-rdma",
       {{"image", "x"}, {"nodes", 4}, {"instanceType", "ml.p5.48xlarge"}, {"masterPort", 23456},
        {"trainerConfig", {{"inline", kConfigWithCheckpoints}}}}},
      {"p4d-configmap-user-env",
       {{"image", "x"},
        {"nodes", 2},
        {"instanceType", "ml.p4d.24xlarge"},
        {"checkpointDir", "/fsx/ckpt/b"},
        {"trainerConfig", {{"configMapRef", {{"name", "my-config"}}}}},
        {"env", json::array({{{"name", "NCCL_DEBUG"}, {"value", "INFO"}},
                             {{"name", "HT_REDUCE_DTYPE"}, {"value", "bf16"}},
                             {{"name", "MY_SECRET"},
                              {"valueFrom", {{"secretKeyRef", {{"name", "s"}, {"key", "k"}}}}}}})}}},
  };
}

api::ObjectMeta Meta() {
  api::ObjectMeta m;
  m.name = "job";
  m.namespace_ = "ns";
  m.uid = "uid-1";
  return m;
}

// Names in `env` that are neither the user's (spec.env) nor defined by the
// contract as set by the operator, each with the reason.
std::vector<std::string> Violations(const json& env, const api::TrainingJobSpec& spec) {
  std::set<std::string> user;
  for (const api::EnvVar& e : spec.env) user.insert(e.name);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const json& e : env) {
    const std::string name = e["name"];
    if (!seen.insert(name).second) out.push_back(name + ": set twice");
    if (user.count(name)) continue;
    const contract::EnvVarSpec* v = contract::FindEnvVar(name);
    if (v == nullptr) {
      out.push_back(name + ": not defined in contract/env.h");
    } else if (v->set_by != contract::SetBy::kOperator && v->set_by != contract::SetBy::kOperatorDefault) {
      out.push_back(name + ": the contract does not let the operator set it");
    }
  }
  return out;
}

TEST(BuildersContract, EveryPodEnvNameIsDefinedByTheContract) {
  for (const Case& c : Cases()) {
    auto spec = api::ParseSpec(c.spec, Meta());
    ASSERT_TRUE(spec.ok()) << c.name << ": " << spec.status().ToString();
    for (int rank : {0, spec->nodes - 1}) {
      for (int attempt : {0, 3}) {
        auto pod = BuildPod(Meta(), *spec, PodOptions{rank, attempt, {}});
        ASSERT_TRUE(pod.ok()) << c.name;
        const json& env = (*pod)["spec"]["containers"][0]["env"];
        EXPECT_THAT(Violations(env, *spec), ::testing::IsEmpty()) << c.name << " rank " << rank;

        std::set<std::string> names;
        for (const json& e : env) names.insert(e["name"]);
        for (const contract::EnvVarSpec& v : contract::EnvVars()) {
          const std::string name(v.name);
          if (v.set_by == contract::SetBy::kOperator) {
            // Set only when known: the checkpoint dir, and a profile request
            // (none on these jobs; see ProfileAnnotationBecomesTheEnv).
            const bool expected = (name != contract::env::kCheckpointDir || !spec->checkpoint_dir.empty()) &&
                                  name != contract::env::kProfile;
            EXPECT_EQ(names.count(name), expected ? 1u : 0u) << c.name << ": " << name;
          } else if (v.set_by == contract::SetBy::kLauncher || v.set_by == contract::SetBy::kUser ||
                     v.set_by == contract::SetBy::kTorchrun) {
            EXPECT_EQ(names.count(name), 0u) << c.name << ": " << name << " is not the operator's to set";
          }
        }
      }
    }
  }
}

// kubectl annotate tj j hypertrain.dev/profile=... reaches the trainer of the
// pods built afterwards as HYPERTRAIN_PROFILE, canonical; a malformed one does not.
TEST(BuildersContract, ProfileAnnotationBecomesTheEnv) {
  auto spec = api::ParseSpec(Cases().front().spec, Meta());
  ASSERT_TRUE(spec.ok());
  auto profile_env = [&](const api::ObjectMeta& meta) -> std::optional<std::string> {
    for (const json& e : BuildEnv(meta, *spec, 0, 1)) {
      if (e["name"] == contract::env::kProfile) return e["value"].get<std::string>();
    }
    return std::nullopt;
  };
  api::ObjectMeta meta = Meta();
  EXPECT_FALSE(profile_env(meta).has_value());
  meta.annotations[contract::kAnnotationProfile] = "start_step=0,num_steps=4";
  EXPECT_EQ(profile_env(meta), "num_steps=4");
  EXPECT_TRUE(Violations(BuildEnv(meta, *spec, 0, 1), *spec).empty());
  meta.annotations[contract::kAnnotationProfile] = "steps=4";
  EXPECT_FALSE(profile_env(meta).has_value());
  std::string why;
  EXPECT_FALSE(ProfileOf(meta, &why).has_value());
  EXPECT_NE(why.find("unknown key 'steps'"), std::string::npos) << why;
}

TEST(BuildersContract, LibraryDefaultsOnlyOnGpuPodsAndTheUserWins) {
  for (const Case& c : Cases()) {
    auto spec = api::ParseSpec(c.spec, Meta());
    ASSERT_TRUE(spec.ok()) << c.name;
    std::map<std::string, std::string> env;
    for (const json& e : BuildEnv(Meta(), *spec, 0, 0)) env[e["name"]] = e.value("value", "<valueFrom>");
    const bool gpu = spec->gpus_per_node > 0;
    EXPECT_EQ(env.count(contract::env::kNcclSocketIfname), gpu ? 1u : 0u) << c.name;
    EXPECT_EQ(env.count(contract::env::kFiProvider), spec->efa_per_node > 0 ? 1u : 0u) << c.name;
    EXPECT_EQ(env.count(contract::env::kFiEfaUseDeviceRdma), spec->gpudirect_rdma ? 1u : 0u) << c.name;
  }
  auto spec = api::ParseSpec(Cases().back().spec, Meta());
  ASSERT_TRUE(spec.ok());
  std::map<std::string, std::string> env;
  for (const json& e : BuildEnv(Meta(), *spec, 0, 0)) env[e["name"]] = e.value("value", "<valueFrom>");
  EXPECT_EQ(env[contract::env::kNcclDebug], "INFO");
  EXPECT_EQ(env[contract::env::kCheckpointDir], "/fsx/ckpt/b");
  // The grace budget is the pod's own terminationGracePeriodSeconds.
  auto pod = BuildPod(Meta(), *spec, PodOptions{0, 0, {}});
  ASSERT_TRUE(pod.ok());
  EXPECT_EQ(env[contract::env::kTerminationGraceS],
            std::to_string((*pod)["spec"]["terminationGracePeriodSeconds"].get<int64_t>()));
}

TEST(BuildersContract, TheCheckCatchesAnUndefinedName) {
  // The check above is not vacuous: a name the contract dropped, or one it
  // never had, is reported.
  auto spec = api::ParseSpec(Cases()[0].spec, Meta());
  ASSERT_TRUE(spec.ok());
  json env = BuildEnv(Meta(), *spec, 0, 0);
  env.push_back({{"name", "HT_JOB_ID"}, {"value", "x"}});
  env.push_back({{"name", "RANK"}, {"value", "0"}});
  env.push_back({{"name", "MASTER_PORT"}, {"value", "1"}});
  EXPECT_THAT(Violations(env, *spec),
              ::testing::ElementsAre("HT_JOB_ID: not defined in contract/env.h",
                                     "RANK: the contract does not let the operator set it", "MASTER_PORT: set twice"));
}

}  // namespace
}  // namespace hypertrain::controller
