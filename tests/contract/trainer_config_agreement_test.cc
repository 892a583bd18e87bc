// The trainer's config loader (runtime/config) and the operator's reading of
// the same YAML (operator/api: the job-shape check and the dry-run estimate)
// agree on every key both need (contract/trainer_config.h), for every trainer
// config in examples/ (plain files, TrainingJobs' inline configs, the interop
// manifests' ConfigMaps) and every HyperPod recipe in examples/recipes/, and
// both refuse the same bad values with the same message.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "contract/sharding.h"
#include "operator/api/estimate.h"
#include "operator/api/trainer_config.h"
#include "operator/api/training_job.h"
#include "operator/api/yaml_json.h"
#include "runtime/config/config.h"

namespace hypertrain {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string name;
  std::string yaml;
  int nodes = 0;  // the job's shape; 0: the config's own trainer.num_nodes/devices
  int nproc = 0;
  std::vector<std::string> overrides;  // what a launcher adds (recipes)
};

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Every trainer config an example file holds.
void CollectExample(const fs::path& p, std::vector<Case>* out) {
  const std::vector<YAML::Node> docs = YAML::LoadAll(ReadFile(p));
  for (size_t i = 0; i < docs.size(); ++i) {
    const YAML::Node& d = docs[i];
    const std::string name = p.string() + "#" + std::to_string(i);
    if (!d.IsMap()) continue;
    if (d["trainer"] || d["model"]) {
      Case c{name, ReadFile(p)};
      // What the file's own usage line adds on the command line.
      if (p.filename() == "lora-sft-cpu.yaml") c.overrides = {"model.hf_model_name_or_path=/tmp/hf-llama"};
      out->push_back(c);
      continue;
    }
    const std::string kind = d["kind"] ? d["kind"].as<std::string>() : "";
    if (kind == "TrainingJob") {
      // The job's shape as the operator parses it (ranks per node from the
      // instance type when not given).
      auto docs_json = api::YamlDocumentsToJson(ReadFile(p));
      ASSERT_TRUE(docs_json.ok()) << docs_json.status().ToString();
      api::ObjectMeta meta;
      meta.name = "j";
      meta.namespace_ = "ns";
      meta.uid = "uid";
      auto spec = api::ParseSpec((*docs_json)[i]["spec"], meta);
      ASSERT_TRUE(spec.ok()) << name << ": " << spec.status().ToString();
      if (!spec->trainer_config.inline_yaml) continue;
      out->push_back({name, *spec->trainer_config.inline_yaml, spec->nodes, spec->nproc_per_node});
    } else if (kind == "ConfigMap" && d["data"]) {
      for (auto it = d["data"].begin(); it != d["data"].end(); ++it) {
        const std::string key = it->first.as<std::string>();
        if (key.size() > 5 && key.compare(key.size() - 5, 5, ".yaml") == 0) {
          out->push_back({name + ":" + key, it->second.as<std::string>()});
        }
      }
    }
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> out;
  for (const char* dir : {"examples", "examples/interop"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".yaml") CollectExample(e.path(), &out);
    }
  }
  for (const auto& e : fs::directory_iterator("examples/recipes")) {
    if (e.path().extension() != ".yaml") continue;
    // What the HyperPod launcher supplies (examples/recipes/README.md); the
    // 8B recipe's tensor parallel degree 2 is the trainer's own refusal
    // (runtime/cmd:recipes_test), not a shared key.
    Case c{e.path().string(), ReadFile(e.path()), 0, 0,
           {"base_results_dir=/tmp/results", "model.tensor_model_parallel_degree=1",
            "model.data.train_dir=/tmp/data"}};
    // The LoRA recipe's base model is the user's (null in the recipe).
    if (c.name.find("lora") != std::string::npos) c.overrides.push_back("model.hf_model_name_or_path=/tmp/hf-llama");
    out.push_back(c);
  }
  return out;
}

TEST(TrainerConfigAgreementTest, EveryExampleAndRecipeReadsTheSameOnBothSides) {
  const std::vector<Case> cases = AllCases();
  int recipes = 0, jobs = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    recipes += c.name.find("recipes/") != std::string::npos;
    jobs += c.nodes > 0;
    auto t = config::ParseTrainConfig(c.yaml, c.overrides, c.name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const int nodes = c.nodes > 0 ? c.nodes : static_cast<int>(t->num_nodes);
    const int nproc = c.nproc > 0 ? c.nproc : static_cast<int>(t->devices);

    auto summary = api::ValidateTrainerConfig(c.yaml, nodes, nproc);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->max_steps, t->max_steps);
    EXPECT_EQ(summary->sharding_strategy, contract::ShardingStrategyName(t->sharding_strategy));
    EXPECT_EQ(summary->requested_shard_degree, t->shard_degree);
    EXPECT_EQ(summary->grad_accumulation_steps, t->grad_accumulation_steps);
    std::string why;
    EXPECT_EQ(summary->shard_degree,
              contract::ResolveShardDegree(t->sharding_strategy, t->shard_degree, int64_t{nodes} * nproc, nproc, &why))
        << why;

    auto run = api::RunShapeFromTrainerConfig(c.yaml, nodes, nproc, /*gpus=*/true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_EQ(run->model.vocab_size, t->model.vocab_size);
    EXPECT_EQ(run->model.hidden_size, t->model.hidden_size);
    EXPECT_EQ(run->model.num_hidden_layers, t->model.num_hidden_layers);
    EXPECT_EQ(run->model.num_attention_heads, t->model.num_attention_heads);
    EXPECT_EQ(run->model.num_key_value_heads, t->model.num_key_value_heads);
    EXPECT_EQ(run->model.intermediate_size, t->model.intermediate_size);
    EXPECT_EQ(run->model.tie_word_embeddings, t->model.tie_word_embeddings);
    EXPECT_EQ(run->seq_len, t->seq_len());
    EXPECT_EQ(run->micro_batch, t->train_batch_size);
    EXPECT_EQ(run->grad_accumulation, t->grad_accumulation_steps);
    EXPECT_EQ(run->precision, t->precision);
    EXPECT_EQ(run->checkpointing, t->activation_checkpointing);
    EXPECT_EQ(run->strategy, t->sharding_strategy);
    EXPECT_EQ(run->shard_degree, t->shard_degree);
  }
  // Every file was seen: 3 recipes, the TrainingJob examples, the plain configs.
  EXPECT_EQ(recipes, 3);
  EXPECT_GE(jobs, 5);
  EXPECT_GE(cases.size(), 11u);
}

// Each shared key's bad value: both sides refuse it, with the one message.
TEST(TrainerConfigAgreementTest, BothRefuseTheSameValuesWithOneMessage) {
  const std::pair<const char*, const char*> bad[] = {
      {"trainer: {precision: fp8}\nmodel: {}\n", "trainer.precision: 'fp8' is not one of bf16, fp16, fp32, tf32"},
      {"trainer: {max_steps: ten}\nmodel: {}\n", "trainer.max_steps: 'ten' is not an integer"},
      {"trainer: {num_nodes: [2]}\nmodel: {}\n", "trainer.num_nodes: expected an integer, got a list"},
      {"trainer: {}\nmodel: {shape: 70b}\n", "model.shape: '70b' is not one of tiny, 125m, 1b, 8b"},
      {"trainer: {}\nmodel: {shard_degree: two}\n", "model.shard_degree: 'two' is not an integer"},
      {"trainer: {}\nmodel: {sharding_strategy: zero3}\n", "model.sharding_strategy: 'zero3' is not one of"},
      {"trainer: {}\nmodel: {activation_checkpointing: partial}\n",
       "model.activation_checkpointing: 'partial' is not one of none, selective, full"},
      {"trainer: {}\nmodel: {micro_batch_size: 1.5}\n", "model.micro_batch_size: '1.5' is not an integer"},
      {"trainer: {}\nmodel: {tie_word_embeddings: maybe}\n", "model.tie_word_embeddings: 'maybe' is not true or false"},
  };
  for (const auto& [yaml, want] : bad) {
    SCOPED_TRACE(yaml);
    auto t = config::ParseTrainConfig(yaml, {});
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find(want), std::string::npos) << t.status().ToString();
    auto summary = api::ValidateTrainerConfig(yaml, 1, 1);
    ASSERT_FALSE(summary.ok());
    EXPECT_NE(summary.status().message().find(want), std::string::npos) << summary.status().ToString();
    auto run = api::RunShapeFromTrainerConfig(yaml, 1, 1, true);
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.status().message().find(want), std::string::npos) << run.status().ToString();
  }
  // The spellings the trainer accepts, the operator accepts (issue 37).
  for (const char* yaml : {"trainer: {precision: bf16-mixed}\nmodel: {data: {use_synthetic_data: true}}\n",
                           "trainer: {precision: 16-mixed}\nmodel: {data: {use_synthetic_data: true}}\n",
                           "trainer: {precision: '32'}\n"
                           "model: {activation_checkpointing: 'True', data: {use_synthetic_data: true}}\n"}) {
    SCOPED_TRACE(yaml);
    auto t = config::ParseTrainConfig(yaml, {});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto run = api::RunShapeFromTrainerConfig(yaml, 1, 1, true);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    EXPECT_EQ(run->precision, t->precision);
    EXPECT_EQ(run->checkpointing, t->activation_checkpointing);
    EXPECT_TRUE(api::ValidateTrainerConfig(yaml, 1, 1).ok());
  }
}

}  // namespace
}  // namespace hypertrain
