#include "contract/trainer_config.h"

#include <gtest/gtest.h>

namespace hypertrain::contract {
namespace {

std::optional<SharedTrainerConfig> Read(const std::string& yaml, std::string* error) {
  return ReadSharedTrainerConfig(YAML::Load(yaml), error);
}

TEST(ConfigAtTest, FollowsDottedKeysThroughMappingsOnly) {
  const YAML::Node root = YAML::Load("model: {peft: {rank: 8, target_modules: [q, v]}, shape: null}\nlist: [a]");
  EXPECT_EQ(ConfigAt(root, "model.peft.rank").as<int>(), 8);
  EXPECT_TRUE(ConfigAt(root, "model.peft.target_modules").IsSequence());
  EXPECT_TRUE(ConfigAt(root, "model.peft").IsMap());
  EXPECT_TRUE(ConfigAt(root, "model.shape").IsNull());  // given as null: defined
  EXPECT_FALSE(ConfigAt(root, "model.peft.alpha").IsDefined());
  EXPECT_FALSE(ConfigAt(root, "model.peft.rank.x").IsDefined());  // a scalar has no keys
  EXPECT_FALSE(ConfigAt(root, "list.0").IsDefined());             // nor does a list
  EXPECT_FALSE(ConfigAt(YAML::Load("3"), "model").IsDefined());
  // The lookup leaves the document as it was (no keys added on the way).
  EXPECT_FALSE(root["model"]["peft"]["alpha"].IsDefined());
  EXPECT_EQ(root["model"]["peft"].size(), 2u);
}

TEST(SharedTrainerConfigTest, DefaultsAreTheTrainers) {
  std::string error;
  auto c = Read("{}", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->max_steps, kDefaultMaxSteps);
  EXPECT_EQ(c->precision, Precision::kBF16);
  EXPECT_EQ(c->sharding_strategy, ShardingStrategy::kHybridShard);
  EXPECT_EQ(c->shard_degree, 0);
  EXPECT_FALSE(c->has_num_nodes);
  const auto tiny = NamedModelShape("tiny");
  EXPECT_EQ(c->model.hidden_size, tiny->model.hidden_size);
  EXPECT_EQ(c->max_context_width, tiny->max_context_width);
  EXPECT_TRUE(c->model.tie_word_embeddings);
}

TEST(SharedTrainerConfigTest, ReadsTheRecipeSpellings) {
  std::string error;
  auto c = Read(
      "trainer: {num_nodes: 2, devices: 8, precision: bf16-mixed, max_steps: 7}\n"
      "model: {precision: fp32, hidden_size: 256, num_hidden_layers: 2, num_attention_heads: 4,\n"
      "        num_key_value_heads: 2, max_context_width: 96, train_batch_size: 2, micro_batch_size: 3,\n"
      "        gradient_accumulation_steps: 4, activation_checkpointing: True,\n"
      "        sharding_strategy: full_shard, shard_degree: 16}\n",
      &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->num_nodes, 2);
  EXPECT_EQ(c->devices, 8);
  EXPECT_TRUE(c->has_num_nodes && c->has_devices);
  EXPECT_EQ(c->max_steps, 7);
  EXPECT_EQ(c->precision, Precision::kBF16);  // trainer.precision wins
  EXPECT_EQ(c->model.hidden_size, 256);
  EXPECT_FALSE(c->model.tie_word_embeddings);  // architecture spelled out, no model.shape
  EXPECT_EQ(c->max_context_width, 96);
  EXPECT_EQ(c->train_batch_size, 3);
  EXPECT_EQ(c->grad_accumulation_steps, 4);
  EXPECT_EQ(c->activation_checkpointing, Checkpointing::kFull);
  EXPECT_EQ(c->sharding_strategy, ShardingStrategy::kFullShard);
  EXPECT_EQ(c->shard_degree, 16);

  c = Read("model: {shape: 1b, activation_checkpointing: '1', tie_word_embeddings: 0}", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->activation_checkpointing, Checkpointing::kFull);
  EXPECT_FALSE(c->model.tie_word_embeddings);
}

TEST(SharedTrainerConfigTest, ErrorsNameTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"model: {shard_degree: x}", "model.shard_degree: 'x' is not an integer"},
      {"model: {shard_degree: [1]}", "model.shard_degree: expected an integer, got a list"},
      {"trainer: {precision: fp8}", "trainer.precision: 'fp8' is not one of bf16, fp16, fp32, tf32"},
      {"model: {shape: 70b}", "model.shape: '70b' is not one of tiny, 125m, 1b, 8b"},
      {"model: {activation_checkpointing: partial}",
       "model.activation_checkpointing: 'partial' is not one of none, selective, full, true (= full), false (= none)"},
      {"model: {sharding_strategy: zero3}", "model.sharding_strategy: 'zero3'"},
      {"model: {tie_word_embeddings: maybe}", "model.tie_word_embeddings: 'maybe' is not true or false"},
  };
  for (const auto& [yaml, want] : cases) {
    std::string error;
    EXPECT_FALSE(Read(yaml, &error)) << yaml;
    EXPECT_EQ(error.rfind(want, 0), 0u) << yaml << " -> " << error;
  }
}

}  // namespace
}  // namespace hypertrain::contract
