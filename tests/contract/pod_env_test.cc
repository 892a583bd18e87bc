// The two sides of contract/env.h meet: the pod the operator's builders make is
// "started" here as the kubelet would (env values, downward-API fields, the
// config volume), and the runtime's own parsers read it: the launcher's node
// env and rank count, the progress reporter's pod, the trainer's config and
// checkpoint dir, the launcher's and the ranks' termination grace budget.
// Every variable the operator sets must be asked for by one of
// them ("read by the runtime, or it is not set").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "contract/env.h"
#include "contract/pod.h"
#include "operator/api/training_job.h"
#include "operator/controller/builders.h"
#include "runtime/cmd/assemble.h"
#include "runtime/config/config.h"
#include "runtime/launch/env.h"
#include "runtime/launch/launch.h"
#include "runtime/progress/progress_reporter.h"
#include "runtime/train/termination.h"

namespace hypertrain {
namespace {

using nlohmann::json;

constexpr char kInline[] =
    "trainer: {max_steps: 12}\n"
    "exp_manager: {exp_dir: /fsx/exp}\n"
    "model: {shape: tiny, sharding_strategy: hybrid_shard, data: {use_synthetic_data: true}}\n";

struct Case {
  const char* name;
  json spec;
};

std::vector<Case> Cases() {
  return {
      {"cpu-2x2", {{"image", "x"}, {"nodes", 2}, {"nprocPerNode", 2}, {"trainerConfig", {{"inline", kInline}}}}},
      {"p5-4-nodes-checkpoint-dir",
       {{"image", "x"},
        {"nodes", 4},
        {"instanceType", "ml.p5.48xlarge"},
        {"masterPort", 23456},
        {"checkpointDir", "/fsx/ckpt/llama"},
        {"trainerConfig", {{"inline", kInline}}}}},
  };
}

api::ObjectMeta Meta() {
  api::ObjectMeta m;
  m.name = "llama";
  m.namespace_ = "team-a";
  m.uid = "uid-7";
  return m;
}

// The container env as the kubelet resolves it for `pod`.
std::map<std::string, std::string> ResolveEnv(const json& pod) {
  std::map<std::string, std::string> out;
  for (const json& e : pod["spec"]["containers"][0]["env"]) {
    const std::string name = e["name"];
    if (e.contains("value")) {
      out[name] = e["value"];
      continue;
    }
    const std::string path = e["valueFrom"]["fieldRef"]["fieldPath"];
    if (path == "metadata.name") {
      out[name] = pod["metadata"]["name"];
    } else if (path == "metadata.namespace") {
      out[name] = pod["metadata"]["namespace"];
    } else if (path.rfind("metadata.labels['", 0) == 0) {
      const std::string key = path.substr(17, path.size() - 19);
      EXPECT_TRUE(pod["metadata"]["labels"].contains(key)) << name << " reads a label the pod lacks: " << key;
      out[name] = pod["metadata"]["labels"].value(key, "");
    } else {
      ADD_FAILURE() << name << ": a fieldRef this test does not resolve: " << path;
    }
  }
  return out;
}

// Looks names up in `env` and remembers every name asked for.
struct RecordingEnv {
  std::map<std::string, std::string> env;
  std::set<std::string> asked;
  config::EnvLookup Lookup() {
    return [this](const char* name) -> const char* {
      asked.insert(name);
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  }
};

// The file the config volume puts at `container_path`, or "" when none does.
std::string ConfigFileAt(const json& pod, const json& config_map, const std::string& container_path) {
  const json& container = pod["spec"]["containers"][0];
  for (const json& m : container["volumeMounts"]) {
    if (m["name"] != controller::kConfigVolume) continue;
    for (const json& v : pod["spec"]["volumes"]) {
      if (v["name"] != controller::kConfigVolume) continue;
      EXPECT_EQ(v["configMap"]["name"], config_map["metadata"]["name"]);
      for (auto it = config_map["data"].begin(); it != config_map["data"].end(); ++it) {
        if (m["mountPath"].get<std::string>() + "/" + it.key() == container_path) return it.value();
      }
    }
  }
  return "";
}

std::string TempDir() {
  std::string t = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/podenvXXXXXX";
  return mkdtemp(t.data());
}

TEST(PodEnvContract, TheRuntimeReadsEveryVariableTheOperatorSets) {
  for (const Case& c : Cases()) {
    auto spec = api::ParseSpec(c.spec, Meta());
    ASSERT_TRUE(spec.ok()) << c.name << ": " << spec.status().ToString();
    auto config_map = controller::BuildConfigMap(Meta(), *spec);
    ASSERT_TRUE(config_map.ok());
    for (int rank = 0; rank < spec->nodes; ++rank) {
      const int attempt = rank;  // any attempt number travels
      SCOPED_TRACE(std::string(c.name) + " rank " + std::to_string(rank));
      auto pod = controller::BuildPod(Meta(), *spec, controller::PodOptions{rank, attempt, {}});
      ASSERT_TRUE(pod.ok());
      RecordingEnv env{ResolveEnv(*pod), {}};

      // The launcher: `hypertrain launch -- train` (the default command).
      const json& command = (*pod)["spec"]["containers"][0]["command"];
      std::vector<std::string> args(command.begin() + 1, command.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      launch::LaunchConfig launch;
      std::string error;
      ASSERT_TRUE(launch::ParseLaunchArgs(static_cast<int>(argv.size()), argv.data(), &launch, &error)) << error;
      auto node = launch::ParseNodeEnv(env.Lookup());
      ASSERT_TRUE(node.ok()) << node.status().ToString();
      EXPECT_EQ(node->master_addr, controller::MasterAddr(Meta()));
      EXPECT_EQ(node->master_port, spec->master_port);
      EXPECT_EQ(node->nnodes, spec->nodes);
      EXPECT_EQ(node->node_rank, rank);
      EXPECT_EQ(node->job_id, Meta().name);
      EXPECT_EQ(node->restart_attempt, attempt);
      auto ranks = launch::LocalWorldSize(*node, launch.nproc_per_node);
      ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
      EXPECT_EQ(*ranks, spec->nproc_per_node);

      // Node 0's progress reporter annotates the job's progress ConfigMap.
      auto target = progress::ReportingTarget(env.Lookup());
      EXPECT_EQ(target.has_value(), rank == 0);
      if (target) {
        EXPECT_EQ(target->namespace_, Meta().namespace_);
        EXPECT_EQ(target->configmap, controller::BuildProgressConfigMap(Meta())["metadata"]["name"]);
      }

      // The trainer (`train`, no --config): the config the volume mounts at
      // HYPERTRAIN_CONFIG, the checkpoint dir the job names.
      ASSERT_EQ(launch.command, std::vector<std::string>{"train"});
      auto source = config::ResolveRunConfig("", {}, env.Lookup());
      ASSERT_TRUE(source.ok()) << source.status().ToString();
      EXPECT_EQ(source->path, contract::kConfigPath);
      const std::string text = ConfigFileAt(*pod, *config_map, source->path);
      ASSERT_FALSE(text.empty()) << "no config file mounted at " << source->path;
      const std::string local = TempDir() + "/config.yaml";
      std::ofstream(local) << text;
      auto loaded = config::LoadTrainConfig(local, source->overrides);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      EXPECT_EQ(loaded->max_steps, 12);
      EXPECT_EQ(loaded->checkpoint_dir,
                spec->checkpoint_dir.empty() ? "/fsx/exp/checkpoints" : spec->checkpoint_dir);

      // On SIGTERM the launcher and every rank read the grace budget: the
      // pod's own terminationGracePeriodSeconds.
      auto grace = train::Termination::GraceFromEnv(env.Lookup());
      ASSERT_TRUE(grace.ok()) << grace.status().ToString();
      EXPECT_EQ(*grace, (*pod)["spec"]["terminationGracePeriodSeconds"].get<double>());

      for (const auto& [name, value] : env.env) {
        const contract::EnvVarSpec* v = contract::FindEnvVar(name);
        ASSERT_NE(v, nullptr) << name;
        if (v->set_by == contract::SetBy::kOperator) {
          EXPECT_TRUE(env.asked.count(name)) << name << " is set by the operator but no runtime reader asked for it";
        }
      }
    }
  }
}

// An elastic job's resized attempt: the pod of 1 of 2 desired nodes says so,
// and the trainer runs twice the accumulation on it (the same global batch).
TEST(PodEnvContract, TheTrainerReadsTheElasticSizeOfItsPod) {
  json s = {{"image", "x"},
            {"nodes", 2},
            {"nprocPerNode", 2},
            {"runPolicy", {{"schedulingTimeoutSeconds", 60}}},
            {"elastic", {{"minNodes", 1}}},
            {"trainerConfig",
             {{"inline", "trainer: {max_steps: 12}\nmodel: {shape: tiny, grad_accumulation_steps: 3, "
                         "data: {use_synthetic_data: true}}\n"}}}};
  auto spec = api::ParseSpec(s, Meta());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  for (int nodes : {1, 2}) {
    SCOPED_TRACE("on " + std::to_string(nodes) + " nodes");
    controller::PodOptions opts{0, 1, {}, nodes, nodes == 2 ? "" : "1 node of 2: the test"};
    auto pod = controller::BuildPod(Meta(), *spec, opts);
    ASSERT_TRUE(pod.ok()) << pod.status().ToString();
    RecordingEnv env{ResolveEnv(*pod), {}};
    auto node = launch::ParseNodeEnv(env.Lookup());
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    EXPECT_EQ(node->nnodes, nodes);
    auto c = config::ParseTrainConfig(
        "", {"model.shape=tiny", "model.grad_accumulation_steps=3", "model.data.use_synthetic_data=true"});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto sized = cmd::SizeForThisWorld(*c, env.Lookup());
    ASSERT_TRUE(sized.ok()) << sized.status().ToString();
    EXPECT_EQ(sized->grad_accumulation_steps, 3 * 2 / nodes);
    for (const auto& [name, value] : env.env) {
      const contract::EnvVarSpec* v = contract::FindEnvVar(name);
      ASSERT_NE(v, nullptr) << name;
      if (v->set_by == contract::SetBy::kOperatorElastic) {
        EXPECT_TRUE(env.asked.count(name)) << name << " is set on elastic pods but no runtime reader asked for it";
      }
    }
    EXPECT_EQ(env.env.count(contract::env::kResizeReason), nodes == 2 ? 0u : 1u);
    EXPECT_EQ(env.env.at(contract::env::kDesiredNnodes), "2");
  }
}

}  // namespace
}  // namespace hypertrain
