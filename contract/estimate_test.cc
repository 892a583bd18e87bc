#include "contract/estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace hypertrain::contract {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Llama-3.2-1B, the project's "1b" (runtime/model/config.cc).
ModelShape OneB() { return {128256, 2048, 16, 32, 8, 8192, true}; }
ModelShape OneTwentyFiveM() { return {32000, 768, 12, 12, 4, 2048, true}; }
ModelShape EightB() { return {128256, 4096, 32, 32, 8, 14336, false}; }

RunShape Bench(ModelShape m, int64_t batch) {
  RunShape r;
  r.model = m;
  r.seq_len = 2048;
  r.micro_batch = batch;
  return r;
}

MemoryParts Memory(const RunShape& r) {
  std::string error;
  const std::optional<ShardingPlan> plan = PlanSharding(r, &error);
  EXPECT_TRUE(plan.has_value()) << error;
  return EstimateMemory(r, *plan);
}

TEST(EstimateTest, ParameterCountsOfThePublishedModels) {
  // Llama-3.2-1B: 1,235,814,400 (HF), Llama-3.1-8B: 8,030,261,248.
  const ParamCounts one = CountParams(OneB());
  EXPECT_EQ(one.total, 1235814400);
  EXPECT_EQ(one.lm_head, 0);
  EXPECT_EQ(one.embedding, 128256 * 2048);
  EXPECT_EQ(one.per_block, 60821504);
  EXPECT_EQ(one.total, one.embedding + one.final_norm + one.blocks);
  const ParamCounts eight = CountParams(EightB());
  EXPECT_EQ(eight.total, 8030261248);
  EXPECT_EQ(eight.lm_head, 128256 * 4096);
  // The LM head takes part in a matmul even when tied; norms never do.
  EXPECT_EQ(one.matmul, one.blocks - 16 * 2 * 2048 + one.embedding);
}

TEST(EstimateTest, FlopsFollowTheTrainersConvention) {
  const ModelShape m = OneB();
  const FlopCounts f = CountFlops(m, 2048, Checkpointing::kNone);
  const double matmul = static_cast<double>(CountParams(m).matmul);
  EXPECT_DOUBLE_EQ(f.model_per_token, 6 * matmul + 12.0 * 16 * 2048 * 2048);
  // docs/PERF.md: 63.65k tok/s at 52.9% of 989.4 TF/s on one H100.
  EXPECT_NEAR(f.model_per_token * 63650 / 989.4e12, 0.529, 0.001);
  EXPECT_DOUBLE_EQ(f.hardware_per_token, f.model_per_token);
  // Megatron's formula assumes full recompute (4 passes, not 3) and a GPT MLP.
  EXPECT_GT(f.megatron_per_token, f.model_per_token);
  const FlopCounts full = CountFlops(m, 2048, Checkpointing::kFull);
  EXPECT_NEAR(full.hardware_per_token / full.model_per_token, 1.28, 0.03);
  EXPECT_DOUBLE_EQ(CountFlops(m, 2048, Checkpointing::kSelective).hardware_per_token,
                   f.model_per_token);
}

TEST(EstimateTest, LayoutPadsForTheShardGroup) {
  const UnitSizes single = LayoutUnits(OneB(), 64, 1);
  EXPECT_EQ(single.embedding_numel, 128256 * 2048 + 2048);
  EXPECT_EQ(single.embedding_padded, single.embedding_numel);
  EXPECT_EQ(single.block_numel, 60821504);
  const UnitSizes sharded = LayoutUnits(OneB(), 64, 8 * 64);
  EXPECT_EQ(sharded.block_padded % (8 * 64), 0);
  EXPECT_GE(sharded.block_padded, single.block_numel);
  EXPECT_LT(sharded.block_padded, single.block_numel + 8 * 64);
}

TEST(EstimateTest, ShardingPlanFollowsTheContract) {
  RunShape r = Bench(OneB(), 4);
  r.nodes = 2;
  r.gpus_per_node = 8;
  std::string error;
  auto p = PlanSharding(r, &error);
  ASSERT_TRUE(p.has_value()) << error;
  EXPECT_EQ(p->shard_degree, 8);  // hybrid_shard: one node
  EXPECT_EQ(p->replica_degree, 2);
  EXPECT_TRUE(p->pooled);
  EXPECT_EQ(p->param_slots, 2);
  EXPECT_EQ(p->pad_multiple, 8 * 64);
  EXPECT_EQ(p->nccl_communicators, 3);
  r.strategy = ShardingStrategy::kShardGradOp;
  p = PlanSharding(r, &error);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->shard_degree, 16);
  EXPECT_EQ(p->param_slots, 16);  // every block stays gathered until its backward
  EXPECT_EQ(p->nccl_communicators, 2);
  r.strategy = ShardingStrategy::kHybridShard;
  r.shard_degree = 3;
  EXPECT_FALSE(PlanSharding(r, &error).has_value());
  EXPECT_NE(error.find("model.shard_degree"), std::string::npos) << error;
  // One process: nothing sharded, nothing padded.
  p = PlanSharding(Bench(OneB(), 4), &error);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->pooled);
  EXPECT_EQ(p->pad_multiple, 1);
  EXPECT_EQ(p->nccl_communicators, 0);
}

// The cuDNN workspace formula reproduces what cuDNN reported in
// docs/PERF.md's runs (1089 and 1634 MiB deterministic, 402 MiB atomic dQ).
TEST(EstimateTest, AttentionWorkspaceMatchesCudnnsReports) {
  const AttentionWorkspace d1 = AttentionWorkspaceBytes(OneB(), 4, 2048, Precision::kBF16, true);
  EXPECT_NEAR(d1.bytes / kMiB, 1089, 1);
  EXPECT_EQ(d1.batch_chunk, 4);
  const AttentionWorkspace d125 =
      AttentionWorkspaceBytes(OneTwentyFiveM(), 16, 2048, Precision::kBF16, true);
  EXPECT_NEAR(d125.bytes / kMiB, 1634, 1);
  const AttentionWorkspace fast = AttentionWorkspaceBytes(OneB(), 4, 2048, Precision::kBF16, false);
  EXPECT_NEAR(fast.bytes / kMiB, 402, 2);
  // Past the 2 GiB cap the deterministic backward runs in batch chunks.
  const AttentionWorkspace big = AttentionWorkspaceBytes(OneB(), 8, 4096, Precision::kBF16, true);
  EXPECT_LT(big.batch_chunk, 8);
  EXPECT_EQ(8 % big.batch_chunk, 0);
  EXPECT_LE(big.bytes, 2048 * kMiB);
  // fp32 compute runs our kernels: 4 B H S.
  EXPECT_EQ(AttentionWorkspaceBytes(OneB(), 4, 2048, Precision::kFP32, true).bytes,
            4 * 4 * 32 * 2048);
}

// The CUDA backend's "allocated" figure of docs/PERF.md's single-GPU runs
// (seventh session, H100): within 1%.
TEST(EstimateTest, CudaMemoryMatchesTheMeasuredSingleGpuRuns) {
  RunShape r = Bench(OneB(), 4);
  MemoryParts m = Memory(r);
  EXPECT_TRUE(m.grads_share_activations);
  EXPECT_EQ(m.loss_chunk_rows, 4096);
  EXPECT_NEAR(m.allocated() / kGiB, 27.81, 0.28);
  EXPECT_NEAR(m.in_use() / kGiB, 28.53, 0.29);
  r.checkpointing = Checkpointing::kSelective;
  EXPECT_NEAR(Memory(r).allocated() / kGiB, 25.00, 0.25);
  r.checkpointing = Checkpointing::kNone;
  r.deterministic = false;
  EXPECT_NEAR(Memory(r).allocated() / kGiB, 27.72, 0.28);
  RunShape s = Bench(OneTwentyFiveM(), 16);
  EXPECT_NEAR(Memory(s).allocated() / kGiB, 11.51, 0.12);
  s.deterministic = false;
  EXPECT_NEAR(Memory(s).allocated() / kGiB, 10.89, 0.11);
  // The backend's own split: state 18 B/param minus the shared block gradients.
  EXPECT_EQ(m.cuda_state + m.cuda_activation_plan + 32 * (1 << 20) + 16 * 2 * 8192 * 4,
            m.allocated());
}

TEST(EstimateTest, ShardingShrinksStateNotActivations) {
  RunShape single = Bench(OneB(), 4);
  RunShape hsdp = single;
  hsdp.nodes = 2;
  hsdp.gpus_per_node = 2;
  const MemoryParts a = Memory(single), b = Memory(hsdp);
  // 1b's units are multiples of 2 x 64 elements already: exactly half.
  EXPECT_EQ(b.weights + b.master + b.optimizer, (a.weights + a.master + a.optimizer) / 2);
  EXPECT_GT(b.unit_pool, 0);
  EXPECT_EQ(a.unit_pool, 0);
  EXPECT_FALSE(b.grads_share_activations);  // pooled gradients are reduce-scattered
  EXPECT_EQ(a.activations, b.activations);
  EXPECT_GT(b.overhead, a.overhead);        // three NCCL communicators
  // Full checkpointing keeps one tensor per block (its input, N x C bf16)
  // plus one block's worth of recompute scratch.
  RunShape full = single;
  full.checkpointing = Checkpointing::kFull;
  RunShape deeper = full;
  deeper.model.num_hidden_layers = 32;
  EXPECT_EQ(Memory(deeper).activations - Memory(full).activations, 16 * 4 * 2048 * 2048 * 2);
  EXPECT_LT(Memory(full).activations, a.activations / 7);
}

// Issue 34: no per-GPU term grows with the number of ranks. The 8B recipe
// (hf_llama3_8b_seq8k_gpu_p5x16_pretrain: hybrid_shard over 64, 2 x 8192 per
// rank) and full_shard of 8B and 1b on 8-GPU nodes, from 1 to 1024 nodes:
// memory per GPU never rises (allocated and peak; the NCCL buffers outside
// them grow by one communicator when a replica group appears, never with the
// number of ranks), and the split embedding gradient's gather is planned only
// while it stays within the vocabulary's rows.
TEST(EstimateTest, MemoryPerGpuDoesNotGrowWithTheWorld) {
  struct Shape {
    ModelShape model;
    int64_t seq, batch;
    ShardingStrategy strategy;
    int64_t shard_degree;
    Device device;
  };
  const Shape shapes[] = {
      {EightB(), 8192, 2, ShardingStrategy::kHybridShard, 64, Device::kCuda},
      {EightB(), 8192, 2, ShardingStrategy::kFullShard, 0, Device::kCuda},
      {EightB(), 8192, 1, ShardingStrategy::kFullShard, 0, Device::kCuda},
      {OneB(), 2048, 4, ShardingStrategy::kFullShard, 0, Device::kCuda},
      {OneB(), 2048, 1, ShardingStrategy::kFullShard, 0, Device::kCuda},
      {OneB(), 2048, 1, ShardingStrategy::kFullShard, 0, Device::kCpu},
  };
  for (const Shape& sh : shapes) {
    int64_t last_allocated = 0, last_peak = 0;
    for (const int64_t nodes : {1, 2, 4, 8, 16, 128, 1024}) {
      RunShape r;
      r.model = sh.model;
      r.seq_len = sh.seq;
      r.micro_batch = sh.batch;
      r.strategy = sh.strategy;
      r.shard_degree = sh.shard_degree;
      r.device = sh.device;
      r.gpus_per_node = 8;
      r.nodes = nodes;
      if (r.world() < sh.shard_degree) continue;
      std::string error;
      const std::optional<ShardingPlan> plan = PlanSharding(r, &error);
      ASSERT_TRUE(plan.has_value()) << error;
      const MemoryParts m = EstimateMemory(r, *plan);
      const int64_t N = sh.batch * sh.seq, D = plan->shard_degree, V = sh.model.vocab_size;
      const std::string what = std::to_string(nodes) + " nodes, shard degree " + std::to_string(D) +
                               ", " + std::to_string(N) + " tokens per rank";
      EXPECT_EQ(m.embedding_gather > 0, D * N <= V) << what;
      EXPECT_LE(m.embedding_gather, V * (4 + 4 * sh.model.hidden_size) + 512) << what;
      if (last_allocated > 0) {
        EXPECT_LE(m.allocated(), last_allocated) << what;
        EXPECT_LE(m.peak(), last_peak) << what;
      }
      last_allocated = m.allocated();
      last_peak = m.peak();
      // Outside the allocations: the context and one set of NCCL buffers per
      // communicator (world, shard, replica): at most three, whatever the world.
      EXPECT_LE(plan->nccl_communicators, 3) << what;
      // Beyond a table's rows the embedding is reduce-scattered like every
      // unit: at 16 nodes and more nothing depends on the world but the shard.
      if (nodes >= 16) {
        EXPECT_EQ(m.embedding_gather, 0) << what;
      }
    }
  }
}

// model.peft.fp8_base on one GPU against the backend's own "allocated ... in
// all" of the runs in docs/PERF.md (H200, LoRA rank 16 on all 7, 2 x 2048):
// the block projections as e4m3 codes (8b: base 8.5 GiB, not 15.0). The
// estimate was 0.5-1.2% under each of them.
TEST(EstimateTest, PeftOnAnFp8BaseMatchesTheMeasuredRuns) {
  const std::vector<std::string> all = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  RunShape r = Bench(EightB(), 2);
  r.checkpointing = Checkpointing::kFull;
  r.peft = {"lora", 16, all, false};
  const MemoryParts bf16 = Memory(r);
  r.peft.fp8_base = true;
  const MemoryParts fp8 = Memory(r);
  EXPECT_NEAR(bf16.frozen_base / kGiB, 14.96, 0.05);
  EXPECT_NEAR(fp8.frozen_base / kGiB, 8.46, 0.05);
  EXPECT_NEAR(fp8.allocated() / kGiB, 11.94, 0.03 * 11.94);  // full checkpointing
  r.checkpointing = Checkpointing::kSelective;
  EXPECT_NEAR(Memory(r).allocated() / kGiB, 22.13, 0.03 * 22.13);
  r.checkpointing = Checkpointing::kFull;
  r.peft.type = "qlora";  // NF4 store, one block of codes beside the dequantised block
  EXPECT_NEAR(Memory(r).allocated() / kGiB, 9.40, 0.03 * 9.40);
  RunShape one = Bench(OneB(), 2);
  one.checkpointing = Checkpointing::kSelective;
  one.peft = {"lora", 16, all, true};
  EXPECT_NEAR(Memory(one).allocated() / kGiB, 5.96, 0.03 * 5.96);
  // Never on the CPU backend (the trainer refuses it): the CPU's fp32 base.
  one.device = Device::kCpu;
  RunShape cpu_bf16 = one;
  cpu_bf16.peft.fp8_base = false;
  EXPECT_EQ(Memory(one).frozen_base, Memory(cpu_bf16).frozen_base);
}

TEST(EstimateTest, NearestMfuRecordPrefersTheSameKindOfRun) {
  RunShape one = Bench(OneB(), 4);
  EXPECT_EQ(NearestMfuRecord(one, CountParams(OneB()).total, "H100 80GB").name, "1b 4x2048, 1 GPU");
  EXPECT_EQ(NearestMfuRecord(one, CountParams(OneB()).total, "H100 80GB").gpu, "H100");
  EXPECT_EQ(NearestMfuRecord(one, CountParams(OneB()).total, "H200 141GB").gpu, "H200");
  RunShape sel = one;
  sel.checkpointing = Checkpointing::kSelective;
  EXPECT_EQ(NearestMfuRecord(sel, CountParams(OneB()).total, "").checkpointing,
            Checkpointing::kSelective);
  RunShape eight = Bench(EightB(), 2);
  eight.nodes = 16;
  eight.gpus_per_node = 8;
  const MfuRecord& r = NearestMfuRecord(eight, CountParams(EightB()).total, "H100 80GB");
  EXPECT_EQ(r.model, "1b");
  EXPECT_GT(r.world, 1);
  EXPECT_EQ(NearestMfuRecord(Bench(OneTwentyFiveM(), 16), 134e6, "").model, "125m");
  RunShape fp8 = Bench(OneB(), 4);
  fp8.fp8 = true;
  EXPECT_TRUE(NearestMfuRecord(fp8, CountParams(OneB()).total, "").fp8);
  EXPECT_FALSE(NearestMfuRecord(one, CountParams(OneB()).total, "").fp8);
  // A sharded FP8 run borrows the HSDP bf16 record, times the FP8 speed-up
  // of the same size on one GPU.
  RunShape sharded_fp8 = Bench(OneB(), 4);
  sharded_fp8.fp8 = true;
  sharded_fp8.gpus_per_node = 8;
  std::string error;
  auto e = MakeEstimate(sharded_fp8, {}, &error);
  ASSERT_TRUE(e.has_value()) << error;
  EXPECT_NEAR(e->mfu, 0.487 * 0.634 / 0.529, 1e-9);
  EXPECT_NE(e->mfu_source.find("for FP8 GEMMs"), std::string::npos) << e->mfu_source;
}

TEST(EstimateTest, TokensPerSecondAndBudget) {
  RunShape r = Bench(OneB(), 4);
  EstimateOptions o;
  o.instance = LookupInstanceType("ml.p5.48xlarge");
  o.tokens = 1e12;
  std::string error;
  auto e = MakeEstimate(r, o, &error);
  ASSERT_TRUE(e.has_value()) << error;
  // The measured run's own MFU gives back its measured tokens/s.
  EXPECT_NEAR(e->tokens_per_s_per_gpu / 63650, 1.0, 0.01);
  EXPECT_NEAR(e->seconds, 1e12 / e->tokens_per_s, 1e-6 * e->seconds);
  EXPECT_NEAR(e->gpu_hours, e->seconds / 3600, 1e-9 * e->gpu_hours);
  EXPECT_EQ(e->steps, static_cast<int64_t>(std::ceil(1e12 / (4 * 2048))));
  ASSERT_EQ(e->fit.size(), 1u);
  EXPECT_TRUE(e->fit[0].fits);
  EXPECT_TRUE(e->alternatives.empty());
  // Five strategies, each valid for one GPU.
  EXPECT_EQ(e->strategies.size(), 5u);
  // No record recomputes whole blocks: full checkpointing keeps the hardware
  // FLOP/s and loses model FLOPs utilisation by its recompute.
  RunShape full = r;
  full.checkpointing = Checkpointing::kFull;
  auto f = MakeEstimate(full, o, &error);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->mfu, 0.529 * f->flops.model_per_token / f->flops.hardware_per_token, 1e-9);
  EXPECT_NE(f->mfu_source.find("full checkpointing"), std::string::npos) << f->mfu_source;
  o.mfu = 0.40;
  e = MakeEstimate(r, o, &error);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->mfu_source, "--mfu");
  EXPECT_NEAR(e->tokens_per_s_per_gpu, 0.40 * 989.4e12 / e->flops.model_per_token, 1e-6);
  o.mfu = 1.5;
  EXPECT_FALSE(MakeEstimate(r, o, &error).has_value());
  EXPECT_NE(error.find("--mfu"), std::string::npos);
}

TEST(EstimateTest, WhatDoesNotFitGetsAlternativesThatDo) {
  RunShape r = Bench(EightB(), 2);
  r.seq_len = 8192;
  EstimateOptions o;
  o.instance = LookupInstanceType("ml.p5.48xlarge");
  std::string error;
  auto e = MakeEstimate(r, o, &error);  // 8B on one H100: 18 B/param alone is 134 GiB
  ASSERT_TRUE(e.has_value()) << error;
  EXPECT_FALSE(e->fit[0].fits);
  r.nodes = 2;
  r.gpus_per_node = 8;
  e = MakeEstimate(r, o, &error);
  ASSERT_TRUE(e.has_value()) << error;
  if (!e->fit[0].fits) {
    ASSERT_FALSE(e->alternatives.empty());
    for (const Alternative& a : e->alternatives) {
      EXPECT_LE(a.in_use, e->fit[0].have) << a.sets.front();
      EXPECT_FALSE(a.sets.empty());
    }
  }
  // Without an instance: one fit line per GPU model of the table.
  std::set<std::string> models;
  for (const InstanceType& t : KnownInstanceTypes()) models.insert(t.gpu_model);
  e = MakeEstimate(r, {}, &error);
  ASSERT_TRUE(e.has_value());
  ASSERT_EQ(e->fit.size(), models.size());
  std::set<std::string> fit_models;
  for (const auto& f : e->fit) fit_models.insert(f.instance.gpu_model);
  EXPECT_EQ(fit_models, models);
}

TEST(EstimateTest, BadShapesNameTheKey) {
  RunShape r = Bench(OneB(), 4);
  r.model.num_key_value_heads = 3;
  std::string error;
  EXPECT_FALSE(MakeEstimate(r, {}, &error).has_value());
  EXPECT_NE(error.find("model.num_key_value_heads"), std::string::npos) << error;
  r = Bench(OneB(), 0);
  EXPECT_FALSE(MakeEstimate(r, {}, &error).has_value());
  EXPECT_NE(error.find("model.train_batch_size"), std::string::npos) << error;
}

TEST(EstimateTest, TokenCounts) {
  EXPECT_DOUBLE_EQ(*ParseTokenCount("1T"), 1e12);
  EXPECT_DOUBLE_EQ(*ParseTokenCount("300B"), 3e11);
  EXPECT_DOUBLE_EQ(*ParseTokenCount("2.5e12"), 2.5e12);
  EXPECT_DOUBLE_EQ(*ParseTokenCount("500M"), 5e8);
  EXPECT_DOUBLE_EQ(*ParseTokenCount("15k"), 15e3);
  for (const char* bad : {"", "T", "-1T", "0", "1X", "abc", "1e999"}) {
    EXPECT_FALSE(ParseTokenCount(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hypertrain::contract
