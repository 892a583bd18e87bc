// The dry run (operator/api/estimate.h) and `hypertrain estimate`
// (runtime/estimate) read a trainer config into the same run: the operator's
// reader follows the trainer's keys and defaults, checked here against the
// trainer's own parser on configs that exercise every key both read.
#include <gtest/gtest.h>

#include "operator/api/estimate.h"
#include "runtime/config/config.h"
#include "runtime/estimate/estimate.h"

namespace hypertrain {
namespace {

void ExpectSameRun(const contract::RunShape& a, const contract::RunShape& b, const std::string& what) {
  EXPECT_EQ(a.model.vocab_size, b.model.vocab_size) << what;
  EXPECT_EQ(a.model.hidden_size, b.model.hidden_size) << what;
  EXPECT_EQ(a.model.num_hidden_layers, b.model.num_hidden_layers) << what;
  EXPECT_EQ(a.model.num_attention_heads, b.model.num_attention_heads) << what;
  EXPECT_EQ(a.model.num_key_value_heads, b.model.num_key_value_heads) << what;
  EXPECT_EQ(a.model.intermediate_size, b.model.intermediate_size) << what;
  EXPECT_EQ(a.model.tie_word_embeddings, b.model.tie_word_embeddings) << what;
  EXPECT_EQ(a.seq_len, b.seq_len) << what;
  EXPECT_EQ(a.micro_batch, b.micro_batch) << what;
  EXPECT_EQ(a.grad_accumulation, b.grad_accumulation) << what;
  EXPECT_EQ(a.precision, b.precision) << what;
  EXPECT_EQ(a.checkpointing, b.checkpointing) << what;
  EXPECT_EQ(a.deterministic, b.deterministic) << what;
  EXPECT_EQ(a.fp8, b.fp8) << what;
  EXPECT_EQ(a.strategy, b.strategy) << what;
  EXPECT_EQ(a.shard_degree, b.shard_degree) << what;
  EXPECT_EQ(a.nodes, b.nodes) << what;
  EXPECT_EQ(a.gpus_per_node, b.gpus_per_node) << what;
  EXPECT_EQ(a.device, b.device) << what;
  EXPECT_EQ(a.prefetch_depth, b.prefetch_depth) << what;
}

TEST(EstimateParityTest, OperatorAndTrainerReadTheSameRun) {
  const std::vector<std::string> configs = {
      "trainer: {max_steps: 5}\nmodel: {data: {use_synthetic_data: true}}\n",
      "trainer: {precision: fp16, deterministic: false}\n"
      "model: {shape: 1b, max_context_width: 8192, train_batch_size: 2, activation_checkpointing: True,\n"
      "        sharding_strategy: full_shard, data: {use_synthetic_data: true, prefetch_depth: 5}}\n",
      "trainer: {precision: tf32}\n"
      "model: {shape: 125m, micro_batch_size: 3, gradient_accumulation_steps: 4, tie_word_embeddings: false,\n"
      "        activation_checkpointing: selective, sharding_strategy: hybrid_shard_zero2, shard_degree: 2,\n"
      "        data: {use_synthetic_data: true}}\n",
      "model: {precision: fp32, hidden_size: 256, num_hidden_layers: 3, num_attention_heads: 8,\n"
      "        num_key_value_heads: 2, intermediate_size: 700, vocab_size: 5000, max_context_width: 96,\n"
      "        train_batch_size: 5, grad_accumulation_steps: 2, activation_checkpointing: False,\n"
      "        sharding_strategy: no_shard, data: {use_synthetic_data: true}}\n",
      "trainer: {backend: cpu}\nmodel: {shape: tiny, data: {use_synthetic_data: true}}\n",
      "model: {shape: 1b, fp8: True, data: {use_synthetic_data: true}}\n",
  };
  for (const std::string& yaml : configs) {
    auto trainer = config::ParseTrainConfig(yaml, {});
    ASSERT_TRUE(trainer.ok()) << yaml << trainer.status().ToString();
    auto from_runtime = estimate::RunShapeFromConfig(*trainer, {2, 4}, nullptr);
    ASSERT_TRUE(from_runtime.ok()) << from_runtime.status().ToString();
    auto from_operator = api::RunShapeFromTrainerConfig(yaml, 2, 4, /*gpus=*/true);
    ASSERT_TRUE(from_operator.ok()) << yaml << from_operator.status().ToString();
    ExpectSameRun(*from_runtime, *from_operator, yaml);
  }
}

}  // namespace
}  // namespace hypertrain
