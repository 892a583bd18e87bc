// The estimate's CPU memory model against what the CPU backend really
// allocates: this binary replaces operator new/delete with counting versions,
// so every byte the backend's buffers hold (std::vector storage) is seen.
// OpenBLAS's own thread buffers (mmap) are outside both.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "contract/estimate.h"
#include "runtime/backends/cpu/backend.h"
#include "runtime/parallel/groups.h"
#include "runtime/parallel/hsdp.h"

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};

void* Count(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  const int64_t now = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                      static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void Uncount(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return Count(std::malloc(n == 0 ? 1 : n)); }
void* operator new[](size_t n) { return Count(std::malloc(n == 0 ? 1 : n)); }
void operator delete(void* p) noexcept { Uncount(p); }
void operator delete[](void* p) noexcept { Uncount(p); }
void operator delete(void* p, size_t) noexcept { Uncount(p); }
void operator delete[](void* p, size_t) noexcept { Uncount(p); }

namespace hypertrain {
namespace {

using contract::Checkpointing;

struct Case {
  const char* name;
  Checkpointing checkpointing;
  bool tied;
  int ranks;  // 1 = single process, else one rank of a shard group of `ranks`
  contract::ShardingStrategy strategy;
};

model::ModelConfig Config(bool tied) {
  model::ModelConfig c = *model::NamedModelConfig("tiny");
  c.vocab_size = 1000;
  c.hidden_size = 192;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.intermediate_size = 520;
  c.num_hidden_layers = 3;
  c.max_context_width = 64;
  c.tie_word_embeddings = tied;
  return c;
}

contract::RunShape MakeRun(const model::ModelConfig& c, const Case& k, int64_t batch) {
  contract::RunShape r;
  r.model = {c.vocab_size,         c.hidden_size,       c.num_hidden_layers, c.num_attention_heads,
             c.num_key_value_heads, c.intermediate_size, c.tie_word_embeddings};
  r.seq_len = c.max_context_width;
  r.micro_batch = batch;
  r.precision = contract::Precision::kFP32;
  r.checkpointing = k.checkpointing;
  r.strategy = k.strategy;
  r.nodes = 1;
  r.gpus_per_node = k.ranks;
  r.device = contract::Device::kCpu;
  return r;
}

model::ActivationCheckpointing ToModel(Checkpointing c) {
  return c == Checkpointing::kNone        ? model::ActivationCheckpointing::kNone
         : c == Checkpointing::kSelective ? model::ActivationCheckpointing::kSelective
                                          : model::ActivationCheckpointing::kFull;
}

class CpuMemoryTest : public ::testing::TestWithParam<Case> {};

TEST_P(CpuMemoryTest, PredictionMatchesTheBackendsAllocations) {
  const Case& k = GetParam();
  const int64_t batch = 3;
  const model::ModelConfig cfg = Config(k.tied);
  const contract::RunShape run = MakeRun(cfg, k, batch);
  std::string error;
  const auto plan = contract::PlanSharding(run, &error);
  ASSERT_TRUE(plan.has_value()) << error;
  const contract::MemoryParts predicted = contract::EstimateMemory(run, *plan);

  model::BackendOptions o;
  o.precision = model::Precision::kFP32;
  o.checkpointing = ToModel(k.checkpointing);
  o.micro_batch_size = batch;
  o.seq_len = cfg.max_context_width;
  if (k.ranks > 1) {  // rank 0 of the shard group, as the trainer's runtime sets it up
    auto groups = parallel::ComputeGroupLayout(k.strategy, 0, k.ranks, k.ranks, 0);
    ASSERT_TRUE(groups.ok()) << groups.status().ToString();
    auto sharded = parallel::ShardedBackendOptions(cfg, o, *groups);
    ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
    o = *sharded;
  }
  const int64_t before = g_live.load();
  auto backend = cpu::CpuBackend::Create(cfg, o);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const int64_t held = g_live.load() - before;
  // The activation plan is exact; the rest within the layout's bookkeeping
  // (tensor names, range vectors: a few KiB).
  EXPECT_EQ((*backend)->activation_bytes(), predicted.activations);
  EXPECT_GE(held, predicted.allocated());
  EXPECT_LE(held, predicted.allocated() + 48 * 1024) << "held " << held << " predicted "
                                                     << predicted.allocated();

  // One step: the peak adds the LM head's logits chunk (and small temporaries).
  if ((*backend)->PoolsUnits()) return;  // pooled passes need the HSDP hooks
  std::vector<int32_t> tokens(batch * cfg.max_context_width);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919) % cfg.vocab_size);
  model::TokenBatch b{tokens.data(), tokens.data(), batch, cfg.max_context_width, nullptr};
  model::NoOpUnitHooks hooks;
  g_peak.store(g_live.load());
  const int64_t base = g_live.load() - held;
  ASSERT_TRUE((*backend)->ForwardBackward(b, 1.0f, hooks).ok());
  const int64_t peak = g_peak.load() - base;
  EXPECT_GE(peak, predicted.peak() - 16 * 1024);
  EXPECT_LE(peak, predicted.peak() + 64 * 1024) << "peak " << peak << " predicted " << predicted.peak();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuMemoryTest,
    ::testing::Values(
        Case{"none_tied", Checkpointing::kNone, true, 1, contract::ShardingStrategy::kHybridShard},
        Case{"selective_untied", Checkpointing::kSelective, false, 1, contract::ShardingStrategy::kHybridShard},
        Case{"full_tied", Checkpointing::kFull, true, 1, contract::ShardingStrategy::kHybridShard},
        Case{"hybrid_shard_2", Checkpointing::kNone, true, 2, contract::ShardingStrategy::kHybridShard},
        Case{"zero2_4_untied", Checkpointing::kSelective, false, 4, contract::ShardingStrategy::kHybridShardZero2},
        Case{"no_shard_2", Checkpointing::kNone, false, 2, contract::ShardingStrategy::kNoShard}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// PEFT: the frozen base one rank keeps (1/S of it under a shard group of S),
// its gather slots and the adapters' state, against the CPU backend's real
// allocations (the activation plan, which PEFT extends with the adapters'
// activations, is the backend's own figure here).
TEST(CpuMemoryTest, PeftShardedBaseMatchesTheBackendsAllocations) {
  for (const char* type : {"lora", "qlora"}) {
    for (int ranks : {1, 2, 4}) {
      SCOPED_TRACE(std::string(type) + " over " + std::to_string(ranks));
      const model::ModelConfig cfg = Config(false);
      contract::RunShape run = MakeRun(cfg, {"peft", Checkpointing::kFull, false, ranks,
                                             contract::ShardingStrategy::kFullShard}, 2);
      run.peft = {type, 8, {"q_proj", "v_proj", "down_proj"}};
      std::string error;
      const auto plan = contract::PlanSharding(run, &error);
      ASSERT_TRUE(plan.has_value()) << error;
      const contract::MemoryParts predicted = contract::EstimateMemory(run, *plan);

      model::BackendOptions o;
      o.precision = model::Precision::kFP32;
      o.checkpointing = model::ActivationCheckpointing::kFull;
      o.micro_batch_size = 2;
      o.seq_len = cfg.max_context_width;
      o.peft.type = std::string(type) == "qlora" ? model::PeftType::kQlora : model::PeftType::kLora;
      o.peft.rank = 8;
      o.peft.targets = {model::kQProj, model::kVProj, model::kDownProj};
      o.base_shard = {ranks - 1, ranks};
      const int64_t before = g_live.load();
      auto backend = cpu::CpuBackend::Create(cfg, o);
      ASSERT_TRUE(backend.ok()) << backend.status().ToString();
      const int64_t held = g_live.load() - before;
      EXPECT_EQ((*backend)->BaseBytes(), predicted.frozen_base);
      const int64_t whole = 4 * model::ParamLayout::Build(cfg)->total_padded_numel();
      EXPECT_LE(predicted.frozen_base * ranks, whole + 4 * ranks * (1 + cfg.num_hidden_layers));
      if (ranks == 1) {
        EXPECT_EQ(predicted.unit_pool, 0);
      }
      const int64_t rest = predicted.allocated() - predicted.activations;
      const int64_t got = held - (*backend)->activation_bytes();
      EXPECT_GE(got, rest);
      EXPECT_LE(got, rest + 48 * 1024) << "held " << got << " predicted " << rest;
    }
  }
}

}  // namespace
}  // namespace hypertrain
