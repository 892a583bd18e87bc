// The estimate's CUDA memory model against the CUDA backend's own counters
// (state, activation plan, unit pool, every cudaMalloc). Runs on a GPU; skips
// elsewhere. The attention workspace comes from cuDNN's plan at run time, so
// the plan is compared within 2% (the formula in contract/estimate.h), the
// state and the pool exactly.
#include <gtest/gtest.h>

#include "contract/estimate.h"
#include "runtime/backends/cuda/backend.h"
#include "runtime/parallel/groups.h"
#include "runtime/parallel/hsdp.h"
#include "runtime/testing/cuda_device.h"

namespace hypertrain {
namespace {

using contract::Checkpointing;

struct Case {
  const char* name;
  const char* shape;
  int64_t batch, seq;
  Checkpointing checkpointing;
  bool deterministic;
  int ranks;  // shard-group size (rank 0 is created); 1 = single GPU
  contract::ShardingStrategy strategy;
};

model::ActivationCheckpointing ToModel(Checkpointing c) {
  return c == Checkpointing::kNone        ? model::ActivationCheckpointing::kNone
         : c == Checkpointing::kSelective ? model::ActivationCheckpointing::kSelective
                                          : model::ActivationCheckpointing::kFull;
}

class CudaMemoryTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaMemoryTest, PredictionMatchesTheBackendsCounters) {
  HT_SKIP_WITHOUT_GPU();
  const Case& k = GetParam();
  model::ModelConfig cfg = *model::NamedModelConfig(k.shape);
  cfg.max_context_width = k.seq;
  contract::RunShape run;
  run.model = {cfg.vocab_size,         cfg.hidden_size,       cfg.num_hidden_layers, cfg.num_attention_heads,
               cfg.num_key_value_heads, cfg.intermediate_size, cfg.tie_word_embeddings};
  run.seq_len = k.seq;
  run.micro_batch = k.batch;
  run.checkpointing = k.checkpointing;
  run.deterministic = k.deterministic;
  run.strategy = k.strategy;
  run.gpus_per_node = k.ranks;
  std::string error;
  const auto plan = contract::PlanSharding(run, &error);
  ASSERT_TRUE(plan.has_value()) << error;
  const contract::MemoryParts p = contract::EstimateMemory(run, *plan);

  model::BackendOptions o;
  o.checkpointing = ToModel(k.checkpointing);
  o.micro_batch_size = k.batch;
  o.seq_len = k.seq;
  o.deterministic = k.deterministic;
  o.single_pass_grads = true;  // grad_accumulation_steps 1, as the trainer sets it
  if (k.ranks > 1) {
    auto groups = parallel::ComputeGroupLayout(k.strategy, 0, k.ranks, k.ranks, 0);
    ASSERT_TRUE(groups.ok()) << groups.status().ToString();
    auto sharded = parallel::ShardedBackendOptions(cfg, o, *groups);
    ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
    o = *sharded;
  }
  auto b = cuda::CudaBackend::Create(cfg, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->state_bytes(), p.cuda_state);
  EXPECT_EQ((*b)->pool_bytes(), p.unit_pool);
  EXPECT_EQ((*b)->shares_grads_with_activations(), p.grads_share_activations);
  EXPECT_NEAR(static_cast<double>((*b)->activation_bytes()), static_cast<double>(p.cuda_activation_plan),
              0.02 * static_cast<double>(p.cuda_activation_plan));
  EXPECT_NEAR(static_cast<double>((*b)->allocated_bytes()), static_cast<double>(p.allocated()),
              0.02 * static_cast<double>(p.allocated()));
  // In use (cudaMemGetInfo after creation): allocated + the CUDA context and
  // libraries, which the estimate puts at 0.72 GiB (no NCCL here).
  const int64_t context = (*b)->PeakMemoryBytes() - (*b)->allocated_bytes();
  EXPECT_GT(context, int64_t{300} << 20);
  EXPECT_LT(context, int64_t{1500} << 20);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaMemoryTest,
    ::testing::Values(
        Case{"m125_b4_none", "125m", 4, 1024, Checkpointing::kNone, true, 1, contract::ShardingStrategy::kHybridShard},
        Case{"m125_b4_selective_fast", "125m", 4, 1024, Checkpointing::kSelective, false, 1,
             contract::ShardingStrategy::kHybridShard},
        Case{"m125_b2_full", "125m", 2, 2048, Checkpointing::kFull, true, 1, contract::ShardingStrategy::kHybridShard},
        Case{"b1_b1_none", "1b", 1, 2048, Checkpointing::kNone, true, 1, contract::ShardingStrategy::kHybridShard},
        Case{"b1_b2_hybrid2", "1b", 2, 2048, Checkpointing::kNone, true, 2, contract::ShardingStrategy::kHybridShard},
        Case{"m125_b4_zero2_4", "125m", 4, 1024, Checkpointing::kSelective, true, 4,
             contract::ShardingStrategy::kHybridShardZero2}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// PEFT: the frozen base one rank keeps (whole, or 1/2 of its storage bytes
// under a shard group of 2, NF4 for QLoRA, e4m3 codes for LoRA on an FP8
// base, which is never sharded) and its gather slots, exactly.
TEST(CudaMemoryTest, PeftFrozenBaseMatchesTheBackendsCounters) {
  HT_SKIP_WITHOUT_GPU();
  for (const char* type : {"lora", "qlora"}) {
    struct Variant {
      int ranks;
      bool fp8_base;
    };
    for (const auto [ranks, fp8_base] : {Variant{1, false}, Variant{2, false}, Variant{1, true}}) {
      SCOPED_TRACE(std::string(type) + " over " + std::to_string(ranks) + (fp8_base ? ", FP8 base" : ""));
      model::ModelConfig cfg = *model::NamedModelConfig("125m");
      cfg.max_context_width = 512;
      contract::RunShape run;
      run.model = {cfg.vocab_size,         cfg.hidden_size,       cfg.num_hidden_layers,
                   cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size,
                   cfg.tie_word_embeddings};
      run.seq_len = 512;
      run.micro_batch = 2;
      run.checkpointing = Checkpointing::kFull;
      run.strategy = contract::ShardingStrategy::kFullShard;
      run.gpus_per_node = ranks;
      run.peft = {type, 16, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
                  fp8_base};
      std::string error;
      const auto plan = contract::PlanSharding(run, &error);
      ASSERT_TRUE(plan.has_value()) << error;
      const contract::MemoryParts p = contract::EstimateMemory(run, *plan);

      model::BackendOptions o;
      o.checkpointing = model::ActivationCheckpointing::kFull;
      o.micro_batch_size = 2;
      o.seq_len = 512;
      o.peft.type = std::string(type) == "qlora" ? model::PeftType::kQlora : model::PeftType::kLora;
      o.peft.rank = 16;
      o.peft.fp8_base = fp8_base;
      o.base_shard = {ranks - 1, ranks};
      auto b = cuda::CudaBackend::Create(cfg, o);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ((*b)->BaseBytes(), p.frozen_base);
      EXPECT_EQ((*b)->pool_bytes(), p.unit_pool);
    }
  }
}

}  // namespace
}  // namespace hypertrain
