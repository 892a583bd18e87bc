#include "runtime/backends/cpu/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/backends/cpu/ops.h"

namespace hypertrain::cpu {
namespace {

using model::BackendOptions;
using model::ModelConfig;
using model::TokenBatch;

std::vector<int32_t> Tokens(int64_t n, int64_t V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % V);
  return t;
}

// One optimizer step the way runtime/train does it (no clipping).
double Step(CpuBackend& b, const std::vector<TokenBatch>& micro, float lr, int step) {
  model::NoOpUnitHooks hooks;
  EXPECT_TRUE(b.ZeroGrads().ok());
  double loss = 0;
  for (const auto& mb : micro) {
    auto l = b.ForwardBackward(mb, 1.0f / micro.size(), hooks);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    loss += *l / micro.size();
  }
  for (int u = 0; u < b.layout().num_units(); ++u) {
    kernels::AdamWParams p;
    p.lr = lr;
    p.step = step;
    p.weight_decay = 0.0f;
    EXPECT_TRUE(b.OptimizerStep(u, p).ok());
  }
  return loss;
}

TEST(CpuBackendTest, OverfitsOneBatch) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 2;
  BackendOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 32;
  o.seed = 1;
  auto b = CpuBackend::Create(c, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto in = Tokens(64, c.vocab_size, 1), tg = Tokens(64, c.vocab_size, 2);
  TokenBatch batch{in.data(), tg.data(), 2, 32};
  const double first = Step(**b, {batch}, 3e-3f, 1);
  EXPECT_NEAR(first, std::log(256.0), 0.1);  // random init: uniform prediction
  double last = first;
  for (int s = 2; s <= 150 && last > 0.05; ++s) last = Step(**b, {batch}, 3e-3f, s);
  EXPECT_LT(last, 0.05) << "first " << first;
}

TEST(CpuBackendTest, AccumulatedMicroBatchesEqualOneBigBatch) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 2;
  const int64_t k = 2, mb = 2, T = 16;
  auto in = Tokens(k * mb * T, c.vocab_size, 3), tg = Tokens(k * mb * T, c.vocab_size, 4);
  BackendOptions big_o;
  big_o.micro_batch_size = k * mb;
  big_o.seq_len = T;
  BackendOptions small_o = big_o;
  small_o.micro_batch_size = mb;
  auto big = std::move(CpuBackend::Create(c, big_o).value());
  auto small = std::move(CpuBackend::Create(c, small_o).value());
  for (int step = 1; step <= 3; ++step) {
    const double lb = Step(*big, {{in.data(), tg.data(), k * mb, T}}, 1e-3f, step);
    const double ls = Step(*small,
                           {{in.data(), tg.data(), mb, T},
                            {in.data() + mb * T, tg.data() + mb * T, mb, T}},
                           1e-3f, step);
    EXPECT_NEAR(lb, ls, 1e-5);
  }
  // AdamW normalises each update to about lr, so an element whose gradient is
  // near zero can move by up to 2 lr per step when the two summation orders
  // round it differently; such elements must be rare, every other one equal.
  const float lr_bound = 2 * 1e-3f * 3;
  int64_t total = 0, loose = 0;
  for (int u = 0; u < big->layout().num_units(); ++u) {
    const auto pb = big->MasterParams(u), ps = small->MasterParams(u);
    for (int64_t i = 0; i < pb.numel; ++i) {
      const float d = std::abs(static_cast<float*>(pb.data)[i] - static_cast<float*>(ps.data)[i]);
      ASSERT_LE(d, lr_bound) << "unit " << u << " elem " << i;
      if (d > 2e-5f) ++loose;
      ++total;
    }
  }
  EXPECT_LE(loose, total / 10000 + 1) << loose << " of " << total << " parameters differ by more than 2e-5";
}

TEST(CpuBackendTest, OwnedRangesLimitTheOptimizer) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 1;
  BackendOptions o;
  o.micro_batch_size = 1;
  o.seq_len = 8;
  o.layout.pad_multiple = 2;
  auto whole = std::move(CpuBackend::Create(c, o).value());
  for (int u = 0; u < whole->layout().num_units(); ++u) {
    const int64_t n = whole->layout().unit(u).padded_numel;
    o.owned.push_back({n / 2, n});  // "rank 1 of 2"
  }
  auto half = std::move(CpuBackend::Create(c, o).value());
  EXPECT_EQ(half->Owned(1).size(), whole->layout().unit(1).padded_numel / 2);
  // Same init whatever the ownership.
  std::vector<float> a(half->Owned(1).size());
  ASSERT_TRUE(half->ReadState(1, model::StateKind::kMasterParams, a.data()).ok());
  EXPECT_EQ(a[0], static_cast<float*>(whole->ComputeParams(1).data)[half->Owned(1).begin]);
  // Gradients land in FullGrads; the sharder would reduce-scatter them into
  // ShardGrads. Here copy the owned half by hand and step.
  auto in = Tokens(8, c.vocab_size, 1), tg = Tokens(8, c.vocab_size, 2);
  model::NoOpUnitHooks hooks;
  ASSERT_TRUE(half->ForwardBackward({in.data(), tg.data(), 1, 8}, 1.0f, hooks).ok());
  const auto before = std::vector<float>(static_cast<float*>(half->ComputeParams(1).data),
                                         static_cast<float*>(half->ComputeParams(1).data) +
                                             half->ComputeParams(1).numel);
  const float* full = static_cast<float*>(half->FullGrads(1).data);
  std::copy(full + half->Owned(1).begin, full + half->Owned(1).end,
            static_cast<float*>(half->ShardGrads(1).data));
  EXPECT_GT(*half->GradSumSquares(1), 0.0);
  kernels::AdamWParams p;
  p.lr = 0.1f;
  ASSERT_TRUE(half->OptimizerStep(1, p).ok());
  const float* after = static_cast<float*>(half->ComputeParams(1).data);
  int changed_lo = 0, changed_hi = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(before.size()); ++i) {
    if (before[i] != after[i]) (i < half->Owned(1).begin ? changed_lo : changed_hi)++;
  }
  EXPECT_EQ(changed_lo, 0);
  EXPECT_GT(changed_hi, 1000);
}

TEST(CpuBackendTest, ClearErrors) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  BackendOptions o;
  o.seq_len = 4096;
  auto b = CpuBackend::Create(c, o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("max_context_width=128"), std::string::npos);
  o.seq_len = 8;
  auto ok = std::move(CpuBackend::Create(c, o).value());
  auto in = Tokens(16, 256, 1);
  model::NoOpUnitHooks hooks;
  auto r = ok->ForwardBackward({in.data(), in.data(), 2, 8}, 1.0f, hooks);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("planned for 1x8"), std::string::npos);
}

// Options of shard rank 1 of 2: it owns the upper half of every (padded) unit.
BackendOptions ShardRank1Of2Options(const ModelConfig& c, int micro_batch, int seq) {
  BackendOptions o;
  o.micro_batch_size = micro_batch;
  o.seq_len = seq;
  o.layout.pad_multiple = 128;
  auto layout = model::ParamLayout::Build(c, o.layout);
  if (!layout.ok()) return o;  // the caller's own Build reports the error
  for (int u = 0; u < layout->num_units(); ++u) {
    const int64_t half = layout->unit(u).padded_numel / 2;
    o.owned.push_back({half, 2 * half});
  }
  return o;
}

// The unit pool (runtime/model/backend.h): only owned shards persist,
// full-size buffers live in slots between acquire and release; released slots
// are NaN; ReleaseGrads folds the owned range into ShardGrads.
TEST(CpuBackendTest, UnitPoolLifecycle) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 3;
  BackendOptions o = ShardRank1Of2Options(c, /*micro_batch=*/1, /*seq=*/16);
  auto layout = model::ParamLayout::Build(c, o.layout);
  ASSERT_TRUE(layout.ok());
  auto plain = CpuBackend::Create(c, o);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->PoolsUnits());
  EXPECT_EQ((*plain)->AcquireParams(1).code(), StatusCode::kFailedPrecondition);

  o.unit_pool = true;
  o.pool_param_slots = 2;
  auto b = CpuBackend::Create(c, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  CpuBackend& p = **b;
  ASSERT_TRUE(p.PoolsUnits());
  const model::Range own = p.Owned(1);
  // The shard holds the same initial values as the unpooled backend's range.
  const model::UnitBuffer shard = p.ComputeShard(1);
  ASSERT_EQ(shard.numel, own.size());
  EXPECT_EQ(shard.data, p.MasterParams(1).data);
  const float* full0 = static_cast<const float*>((*plain)->ComputeParams(1).data);
  for (int64_t i = 0; i < own.size(); ++i) {
    ASSERT_EQ(static_cast<const float*>(shard.data)[i], full0[own.begin + i]) << i;
  }
  EXPECT_EQ(p.ComputeParams(1).data, nullptr);
  EXPECT_EQ(p.FullGrads(1).data, nullptr);

  ASSERT_TRUE(p.AcquireParams(1).ok());
  ASSERT_TRUE(p.AcquireParams(2).ok());
  EXPECT_EQ(p.AcquireParams(3).code(), StatusCode::kFailedPrecondition);  // 2 block slots
  EXPECT_EQ(p.AcquireParams(1).code(), StatusCode::kFailedPrecondition);  // already held
  float* slot = static_cast<float*>(p.ComputeParams(1).data);
  ASSERT_NE(slot, nullptr);
  slot[0] = 1.0f;
  ASSERT_TRUE(p.ReleaseParams(1).ok());
  EXPECT_TRUE(std::isnan(slot[0]));  // poisoned for whoever reads it unacquired
  EXPECT_EQ(p.ComputeParams(1).data, nullptr);
  EXPECT_EQ(p.ReleaseParams(1).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(p.AcquireParams(3).ok());
  ASSERT_TRUE(p.ReleaseParams(2).ok());
  ASSERT_TRUE(p.ReleaseParams(3).ok());

  // Gradients: a zeroed slot; release adds only the owned range, twice.
  ASSERT_TRUE(p.ZeroGrads().ok());
  for (int round = 1; round <= 2; ++round) {
    ASSERT_TRUE(p.AcquireGrads(2).ok());
    float* g = static_cast<float*>(p.FullGrads(2).data);
    const int64_t n = p.FullGrads(2).numel;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], 0.0f);
    for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(i);
    ASSERT_TRUE(p.ReleaseGrads(2).ok());
    EXPECT_EQ(p.FullGrads(2).data, nullptr);
  }
  std::vector<float> sg(own.size());
  ASSERT_TRUE(p.ReadState(2, model::StateKind::kShardGrads, sg.data()).ok());
  for (int64_t i = 0; i < own.size(); ++i) ASSERT_EQ(sg[i], 2.0f * (own.begin + i)) << i;
  EXPECT_EQ(p.ReleaseGrads(2).code(), StatusCode::kFailedPrecondition);

  // WriteState(kMasterParams) refreshes the shard the all-gather reads.
  std::vector<float> w(own.size(), 0.25f);
  ASSERT_TRUE(p.WriteState(1, model::StateKind::kMasterParams, w.data()).ok());
  EXPECT_EQ(static_cast<const float*>(p.ComputeShard(1).data)[0], 0.25f);

  // Without hooks that acquire, a pass is refused rather than reading nothing.
  auto in = Tokens(16, c.vocab_size, 1), tg = Tokens(16, c.vocab_size, 2);
  model::NoOpUnitHooks noop;
  auto refused = p.ForwardBackward(TokenBatch{in.data(), tg.data(), 1, 16}, 1.0f, noop);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  // A pool needs shards: whole units are refused.
  BackendOptions whole;
  whole.micro_batch_size = 1;
  whole.seq_len = 16;
  whole.unit_pool = true;
  EXPECT_EQ(CpuBackend::Create(c, whole).status().code(), StatusCode::kInvalidArgument);
}

// The split embedding gradient's backend half: with shard rank 1 of 2's
// owned range (which starts mid-row of embed_tokens and runs past the table
// into the final norm and padding), AccumulateEmbeddingGrad adds exactly
// EmbeddingBackwardRange over the table part of that range into ShardGrads(0)
// and leaves the rest alone; gathered ids are checked; bad options refused.
TEST(CpuBackendTest, SplitEmbeddingGradAddsOwnedRowsOfGatheredRanks) {
  ModelConfig c = *model::NamedModelConfig("tiny");
  c.num_hidden_layers = 1;
  BackendOptions o = ShardRank1Of2Options(c, /*micro_batch=*/2, /*seq=*/8);
  auto layout = model::ParamLayout::Build(c, o.layout);
  ASSERT_TRUE(layout.ok());
  o.embedding_grad_ranks = 2;
  auto plain = CpuBackend::Create(c, o);  // no pool: no split
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE((*plain)->SplitsEmbeddingGrad());
  EXPECT_EQ((*plain)->AccumulateEmbeddingGrad(false).code(), StatusCode::kFailedPrecondition);
  o.unit_pool = true;
  o.embedding_grad_ranks = -1;
  EXPECT_EQ(CpuBackend::Create(c, o).status().code(), StatusCode::kInvalidArgument);
  o.embedding_grad_ranks = 2;
  auto b = CpuBackend::Create(c, o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  CpuBackend& p = **b;
  ASSERT_TRUE(p.SplitsEmbeddingGrad());
  const model::EmbeddingGradIo io = p.EmbeddingGrad();
  const int64_t N = 16, C = c.hidden_size, V = c.vocab_size;
  ASSERT_EQ(io.ranks, 2);
  ASSERT_EQ(io.tokens_per_rank, N);
  ASSERT_EQ(io.cols, C);
  EXPECT_EQ(io.dtype, model::DType::kF32);
  ASSERT_TRUE(io.tokens && io.dout && io.all_tokens && io.all_dout);
  const model::Range own = p.Owned(0);
  ASSERT_NE(own.begin % C, 0) << "the owned range should start mid-row";
  ASSERT_GT(own.end, V * C) << "the owned range should run past the table";

  std::mt19937_64 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t i = 0; i < 2 * N; ++i) io.all_tokens[i] = static_cast<int32_t>(rng() % V);
  io.all_tokens[0] = io.all_tokens[N] = static_cast<int32_t>(V - 1);  // a row in both ranks
  io.all_tokens[1] = static_cast<int32_t>(own.begin / C);             // the cut row
  float* dout = static_cast<float*>(io.all_dout);
  for (int64_t i = 0; i < 2 * N * C; ++i) dout[i] = d(rng);
  std::vector<float> g0(own.size());
  for (float& x : g0) x = d(rng);
  ASSERT_TRUE(p.WriteState(0, model::StateKind::kShardGrads, g0.data()).ok());
  ASSERT_TRUE(p.AccumulateEmbeddingGrad(false).ok());
  std::vector<float> got(own.size()), want = g0;
  ASSERT_TRUE(p.ReadState(0, model::StateKind::kShardGrads, got.data()).ok());
  EmbeddingBackwardRange(want.data(), own.begin, V * C, dout, io.all_tokens, N, 2, C, false);
  EXPECT_EQ(got, want);
  int64_t changed = 0;
  for (int64_t i = 0; i < own.size(); ++i) {
    changed += got[i] != g0[i];
    if (own.begin + i >= V * C) {
      EXPECT_EQ(got[i], g0[i]) << "past the table: " << i;
    }
  }
  EXPECT_GT(changed, C) << "nothing was added";
  io.all_tokens[3] = static_cast<int32_t>(V);
  EXPECT_EQ(p.AccumulateEmbeddingGrad(false).code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace hypertrain::cpu
