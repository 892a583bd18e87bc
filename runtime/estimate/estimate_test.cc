#include "runtime/estimate/estimate.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "runtime/model/config.h"
#include "runtime/model/layout.h"

namespace hypertrain::estimate {
namespace {

contract::ModelShape Shape(const model::ModelConfig& c) { return c; }  // the shared part

// Random valid shapes: heads | hidden, kv | heads, even head dims.
std::vector<model::ModelConfig> Shapes() {
  std::vector<model::ModelConfig> out;
  for (const std::string& name : model::NamedModelConfigNames()) out.push_back(*model::NamedModelConfig(name));
  std::mt19937 rng(24);
  for (int i = 0; i < 40; ++i) {
    model::ModelConfig c = *model::NamedModelConfig("tiny");
    const int64_t kv = 1 + rng() % 4, group = 1 + rng() % 4, head_dim = 2 * (1 + rng() % 40);
    c.num_key_value_heads = kv;
    c.num_attention_heads = kv * group;
    c.hidden_size = c.num_attention_heads * head_dim;
    c.intermediate_size = 1 + rng() % 700;
    c.vocab_size = 1 + rng() % 3000;
    c.num_hidden_layers = 1 + rng() % 5;
    c.tie_word_embeddings = rng() % 2 == 0;
    out.push_back(c);
  }
  return out;
}

TEST(EstimateLayoutTest, ParamCountsEqualTheModelsLayout) {
  for (const model::ModelConfig& c : Shapes()) {
    SCOPED_TRACE(c.Summary());
    ASSERT_TRUE(c.Validate().ok());
    const contract::ParamCounts p = contract::CountParams(Shape(c));
    EXPECT_EQ(p.total, c.NumParams());
    EXPECT_EQ(p.matmul, c.NumMatmulParams());
    EXPECT_EQ(p.per_block, c.BlockParams());
    const model::ParamLayout layout = *model::ParamLayout::Build(c);
    EXPECT_EQ(p.total, layout.total_param_numel());
    const model::UnitLayout& e = layout.unit(model::ParamLayout::kEmbeddingUnit);
    EXPECT_EQ(p.embedding, e.Find("model.embed_tokens.weight")->numel);
    EXPECT_EQ(p.final_norm, e.Find("model.norm.weight")->numel);
    const model::TensorSlot* head = e.Find("lm_head.weight");
    EXPECT_EQ(p.lm_head, head == nullptr ? 0 : head->numel);
    int64_t block = 0;
    for (const auto& t : layout.unit(1).tensors) block += t.numel;
    EXPECT_EQ(p.per_block, block);
  }
}

TEST(EstimateLayoutTest, UnitSizesEqualTheModelsLayoutForEveryPadding) {
  for (const model::ModelConfig& c : Shapes()) {
    for (int64_t align : {1, 8, 64}) {
      for (int64_t pad : {1, 64, 128, 3 * 64, 8 * 64, 64 * 64}) {
        SCOPED_TRACE(c.Summary() + " align " + std::to_string(align) + " pad " + std::to_string(pad));
        const model::ParamLayout layout = *model::ParamLayout::Build(c, {align, pad});
        const contract::UnitSizes u = contract::LayoutUnits(Shape(c), align, pad);
        EXPECT_EQ(u.num_units, layout.num_units());
        EXPECT_EQ(u.embedding_numel, layout.unit(0).numel);
        EXPECT_EQ(u.embedding_padded, layout.unit(0).padded_numel);
        EXPECT_EQ(u.block_numel, layout.unit(1).numel);
        EXPECT_EQ(u.block_padded, layout.unit(1).padded_numel);
      }
    }
  }
}

// The operator estimates `shape: 1b` with the contract's table, which the
// trainer's NamedModelConfig is built from: same names, same fields.
TEST(EstimateLayoutTest, NamedShapesEqualTheModels) {
  EXPECT_EQ(model::NamedModelConfigNames(), contract::NamedModelShapeNames());
  for (const std::string& name : model::NamedModelConfigNames()) {
    const model::ModelConfig c = *model::NamedModelConfig(name);
    const auto named = contract::NamedModelShape(name);
    ASSERT_TRUE(named.has_value()) << name;
    const contract::ModelShape want = Shape(c);
    const contract::ModelShape& got = named->model;
    EXPECT_EQ(got.vocab_size, want.vocab_size) << name;
    EXPECT_EQ(got.hidden_size, want.hidden_size) << name;
    EXPECT_EQ(got.num_hidden_layers, want.num_hidden_layers) << name;
    EXPECT_EQ(got.num_attention_heads, want.num_attention_heads) << name;
    EXPECT_EQ(got.num_key_value_heads, want.num_key_value_heads) << name;
    EXPECT_EQ(got.intermediate_size, want.intermediate_size) << name;
    EXPECT_EQ(got.tie_word_embeddings, want.tie_word_embeddings) << name;
    EXPECT_EQ(named->max_context_width, c.max_context_width) << name;
  }
  EXPECT_FALSE(contract::NamedModelShape("70b").has_value());
}

TEST(EstimateLayoutTest, FlopsEqualTheTrainersFormulas) {
  for (const model::ModelConfig& c : Shapes()) {
    for (int64_t seq : {128, 2048, 8192}) {
      const contract::FlopCounts f = contract::CountFlops(Shape(c), seq, contract::Checkpointing::kNone);
      EXPECT_DOUBLE_EQ(f.model_per_token, c.TrainFlopsPerToken(seq));
      EXPECT_NEAR(f.megatron_per_token, c.MegatronFlopsPerIteration(3, seq) / (3.0 * seq),
                  1e-9 * f.megatron_per_token);
    }
  }
}

config::TrainConfig Parse(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  auto c = config::ParseTrainConfig(yaml, sets);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

constexpr char kRecipeLike[] = R"(
trainer: {devices: 8, num_nodes: 2, precision: bf16}
model:
  shape: 1b
  max_context_width: 8192
  train_batch_size: 2
  sharding_strategy: hybrid_shard
  shard_degree: 8
  activation_checkpointing: selective
  fp8: true
  data: {use_synthetic_data: true}
)";

TEST(EstimateConfigTest, RunShapeComesFromTheConfig) {
  const config::TrainConfig c = Parse(kRecipeLike);
  auto run = RunShapeFromConfig(c, {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->model.hidden_size, 2048);
  EXPECT_EQ(run->seq_len, 8192);
  EXPECT_EQ(run->micro_batch, 2);
  EXPECT_EQ(run->nodes, 2);
  EXPECT_EQ(run->gpus_per_node, 8);
  EXPECT_EQ(run->shard_degree, 8);
  EXPECT_EQ(run->checkpointing, contract::Checkpointing::kSelective);
  EXPECT_EQ(run->tokens_per_step(), 2 * 8192 * 16);
  // Flags and the instance's GPU count win over trainer.num_nodes/devices.
  const auto g5 = contract::LookupInstanceType("ml.g5.12xlarge");
  run = RunShapeFromConfig(c, {4, 0}, &*g5);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->nodes, 4);
  EXPECT_EQ(run->gpus_per_node, 4);
  run = RunShapeFromConfig(c, {1, 2}, &*g5);
  EXPECT_EQ(run->gpus_per_node, 2);
  // What the estimate cannot honour is said, key by key.
  const std::vector<std::string> notes = ConfigNotes(c, *RunShapeFromConfig(c, {}, nullptr), nullptr);
  std::string all;
  for (const auto& n : notes) all += n + "\n";
  EXPECT_NE(all.find("model.fp8"), std::string::npos) << all;
}

// The strategy arrives typed: an unknown name is the config's error (exit 2),
// before any estimate; a known one is the run shape's strategy.
TEST(EstimateConfigTest, UnknownStrategyIsAConfigError) {
  auto bad = config::ParseTrainConfig(kRecipeLike, {"model.sharding_strategy=zero3"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("model.sharding_strategy: 'zero3'"), std::string::npos);
  auto full = config::ParseTrainConfig(kRecipeLike, {"model.sharding_strategy=full_shard", "model.shard_degree=0"});
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  auto run = RunShapeFromConfig(*full, {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->strategy, contract::ShardingStrategy::kFullShard);
}

TEST(EstimateReportTest, TextAndJsonCarryTheSameNumbers) {
  const config::TrainConfig c = Parse(kRecipeLike);
  const auto p5 = contract::LookupInstanceType("ml.p5.48xlarge");
  const contract::RunShape run = *RunShapeFromConfig(c, {}, &*p5);
  contract::EstimateOptions o;
  o.instance = p5;
  o.tokens = 1e12;
  std::string error;
  const auto e = contract::MakeEstimate(run, o, &error);
  ASSERT_TRUE(e.has_value()) << error;
  const std::vector<std::string> notes = ConfigNotes(c, run, &*p5);
  const std::string text = FormatEstimate(*e, notes, "recipe.yaml");
  for (const char* want : {"1,235,814,400", "hybrid_shard*", "full_shard", "no_shard", "= in use",
                           "H100 80GB (ml.p5.48xlarge)", "GPU-hours", "% from 1b 4x2048/GPU, HSDP 2x2", "for FP8 GEMMs", "notes"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  const nlohmann::json j = nlohmann::json::parse(EstimateToJson(*e, notes));
  EXPECT_EQ(j["params"]["total"], 1235814400);
  EXPECT_EQ(j["run"]["world"], 16);
  EXPECT_EQ(j["memoryPerRank"]["inUse"], e->memory.in_use());
  EXPECT_EQ(j["memoryByStrategy"].size(), e->strategies.size());
  EXPECT_EQ(j["fit"][0]["fits"], e->fit[0].fits);
  EXPECT_DOUBLE_EQ(j["budget"]["gpuHours"].get<double>(), e->gpu_hours);
  EXPECT_EQ(j["notes"].size(), notes.size());
}

}  // namespace
}  // namespace hypertrain::estimate
